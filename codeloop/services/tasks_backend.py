"""The tasks server's backend on the bus (`tool_servers.tasks.backend.TasksBackend`).

Everything lives on the bus, nothing in this process, so a restarted tasks server (or serve)
answers for the tasks submitted before:

- a submission is checked (`check_submission`: its `TaskOptions` over the configuration), its
  tree captured as a snapshot, and it is published on `codeloop.task.submit` like `codeloop
  submit` does; a continuation is built from the parent's record as `codeloop continue` builds
  it (`codeloop.continuing.continuation_of`) and published the same way;
- who submitted it is the key `owner.<principal hash>.<task_id>` in the task bucket, written
  before the task is published; a principal sees a task only if its own key exists, and lists
  its tasks by its key prefix;
- the view is read from the task's record (`TaskState`) and, for a pending confirmation, from
  the task's last `confirmation_requested` event and its request key (`agents.runtime.confirmations`);
- waiting follows the task's events (an ordered consumer from "now", re-made after a
  reconnect), and the change feed behind resource notifications is a plain subscription to
  every task's events: nothing polls the bucket.
"""

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Protocol

import anyio
from pydantic import JsonValue

from agents.client import cancel_task, is_final, new_task_id, submit_task
from agents.messages import TERMINAL_STATUSES, Budgets, ModelNames, PipelineChoice, TaskState, TaskSubmitted
from agents.orchestrator.pipeline import PipelineError, choice_of, parse_pipeline
from agents.orchestrator.records import TaskRecords
from agents.quotas import Ledger, resets_at
from agents.runtime.confirmations import answer as answer_confirmation
from agents.runtime.confirmations import pending_confirmation
from agents.workspace import WorkspaceError
from bus import subjects
from bus.connection import Bus, nats_errors
from bus.envelope import Envelope, parse_envelope
from bus.errors import BusError, MalformedMessage
from bus.records import Bucket, keys_under, read
from bus.stored import Follower, follow
from codeloop.config.checks import check_submission as check_settings
from codeloop.config.errors import ConfigError
from codeloop.config.pipelines import PipelineConfigError, check_served, resolve_pipeline
from codeloop.config.settings import Settings
from codeloop.config.task_builder import Submitter, make_task, task_settings
from codeloop.config.task_options import TaskOptions
from codeloop.continuing import ContinueRefused, continuation_of
from codeloop.services.center_watch import center_quota, quota_breach
from codeloop.snapshots import capture_repository
from tool_servers.tasks.backend import (
    OnProgress,
    Submission,
    SubmissionRefused,
    TaskStillRunning,
    TooManyTasks,
)
from tool_servers.tasks.views import DayUse, PendingConfirmation, TaskView, UsageReport

# Named as before the services package existed: logging configurations and filters name it.
log = logging.getLogger("codeloop.tasks_backend")
DEFAULT_MAX_RUNNING = 4
"""Unfinished tasks one principal may have at a time; more are refused until one ends."""
IDLE_PROGRESS_S = 10.0
"""A waiting client hears a progress notification at least this often, so its own request
timeout (often 60 s) does not expire during a long quiet step."""
_RECONNECT_CHECK_S = 2.0


def check_submission(
    submission: Submission, *, credentials: bool = True
) -> tuple[ModelNames, Budgets, PipelineChoice | None, bool]:
    """The submission's models, budgets, pipeline and whether it requires a verified patch, checked
    the way `codeloop run` checks them (`checked_submission`).

    Raises:
        SubmissionRefused: as `checked_submission`.
    """
    settings, pipeline = checked_submission(submission, credentials=credentials)
    return settings.models, settings.budgets, pipeline, settings.verification.require == "passed"


def checked_submission(
    submission: Submission, *, credentials: bool = True
) -> tuple[Settings, PipelineChoice | None]:
    """The submission's settings and pipeline, checked the way `codeloop run` checks them.

    With `credentials=False` the model keys are not looked for in this process's environment: the
    workers on a remote bus hold them, and a model whose key they lack fails there, at its first
    call, as it would for `codeloop submit` from a machine that has the key.

    What the client gives (`TaskOptions`, by `submit_task` argument) is the top layer of the
    configuration, as a command line is for `codeloop run`; the environment, the repository's
    `codeloop.toml` and the user's file give the rest. The one place the tasks server validates
    what a client asks for beyond the tool's schema.

    Raises:
        SubmissionRefused: an unknown model or provider, a missing `function:` file or credentials,
            a budget out of range or unpriced, an unknown pipeline or one that cannot run; `field`
            names the `submit_task` argument when one is to blame.
    """
    options = TaskOptions.from_arguments(submission.options)
    try:
        settings = task_settings(options, repo=submission.repo, naming="argument")
        task = make_task(submission.text, submission.repo, settings=settings, mode=submission.mode)
        check_settings(task, settings=settings, credentials=credentials)
    except ConfigError as exc:
        message = str(exc)
        field = TaskOptions.named_in(message, "argument")
        raise SubmissionRefused(message, **({"field": field} if field else {})) from None
    if options.pipeline is None:
        return settings, None
    try:
        pipeline = resolve_pipeline(
            options.pipeline, submission.repo, mode=submission.mode, settings=settings
        )
    except (PipelineError, PipelineConfigError) as exc:
        raise SubmissionRefused(f"pipeline: {exc}", field="pipeline") from None
    return settings, choice_of(pipeline)


def _principal_key(principal: str) -> str:
    return hashlib.sha256(principal.encode()).hexdigest()[:24]


class _Subjected(Protocol):
    """A message of the bus's event subjects, of which only the subject is read."""

    subject: str


class BusTasks:
    """`TasksBackend` over an open bus."""

    task_options = TaskOptions.arguments_model()
    """`submit_task`'s task options: `TaskOptions`, named by argument."""

    def __init__(
        self, bus: Bus, kv: Bucket, *, max_running: int = DEFAULT_MAX_RUNNING, check_credentials: bool = True
    ) -> None:
        self.bus = bus
        self.kv = kv
        self.records = TaskRecords(kv)
        self.max_running = max_running
        self.check_credentials = check_credentials

    @classmethod
    async def open(
        cls, bus: Bus, *, max_running: int = DEFAULT_MAX_RUNNING, check_credentials: bool = True
    ) -> "BusTasks":
        """The backend on `bus`; `check_credentials=False`: the workers hold the model keys (see `check_submission`)."""
        kv = await bus.kv(subjects.TASKS_BUCKET)
        return cls(bus, kv, max_running=max_running, check_credentials=check_credentials)

    # ownership

    def _owner_key(self, principal: str, task_id: str) -> str:
        return f"owner.{_principal_key(principal)}.{task_id}"

    async def _submitted_at(self, principal: str, task_id: str) -> float | None:
        """When `principal` submitted `task_id` (epoch seconds), or None when it did not."""
        if not subjects.is_token(task_id):
            return None
        value = (await read(self.kv, self._owner_key(principal, task_id))).value
        return float(json.loads(value)["submitted_at"]) if value else None

    async def _own_ids(self, principal: str) -> list[str]:
        prefix = f"owner.{_principal_key(principal)}."
        return [key.removeprefix(prefix) for key in await keys_under(self.kv, prefix)]

    # TasksBackend

    async def _refuse_over_cap(self, principal: str) -> None:
        running = [v for v in await self.list(principal, status=None, limit=10_000) if not v.ended]
        if len(running) >= self.max_running:
            raise TooManyTasks(
                f"{principal} already has {len(running)} unfinished tasks (the cap is "
                f"{self.max_running}); wait for one to end or cancel one, then submit again",
                running=[v.task_id for v in running],
                cap=self.max_running,
            )

    async def _publish_owned(self, principal: str, task: TaskSubmitted) -> str:
        """Write `principal`'s owner key for a new task id, then publish `task` under it."""
        task_id = new_task_id()
        owner = json.dumps({"principal": principal, "submitted_at": time.time()}).encode()
        owner_key = self._owner_key(principal, task_id)
        with nats_errors():
            await self.kv.put(owner_key, owner)
        try:
            await submit_task(self.bus, task, task_id=task_id)
        except BaseException:
            # Not submitted: no owner record may claim a task that does not exist.
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self.kv.delete(owner_key)
            raise
        return task_id

    async def continue_task(
        self, principal: str, task_id: str, *, text: str | None, options: dict[str, JsonValue]
    ) -> str | None:
        if await self._submitted_at(principal, task_id) is None:
            return None
        parent = await self.records.get(task_id)
        if parent is None:  # published, not yet taken by the orchestrator
            raise TaskStillRunning(
                f"task {task_id} has not started yet: wait for it to end (wait_task), then continue it",
                task_id=task_id,
                status="submitted",
            )
        try:
            task = continuation_of(
                parent,
                text=text,
                options=TaskOptions.from_arguments(options),
                naming="argument",
                credentials=self.check_credentials,
            )
        except ContinueRefused as exc:
            refused = TaskStillRunning if exc.reason == "running" else SubmissionRefused
            field = TaskOptions.named_in(str(exc), "argument")
            details = {"field": field} if field else {}
            raise refused(str(exc), task_id=task_id, status=parent.status, **details) from None
        await self._refuse_over_quota(principal)
        await self._refuse_over_cap(principal)
        return await self._publish_owned(principal, task.model_copy(update={"principal": principal}))

    async def submit(self, submission: Submission) -> str:
        settings, pipeline = checked_submission(submission, credentials=self.check_credentials)
        await self._refuse_over_quota(submission.principal)
        await self._refuse_over_cap(submission.principal)
        if pipeline is not None:  # before the snapshot: a role nothing serves is refused at once
            try:
                await check_served(
                    self.bus, parse_pipeline(pipeline.name, pipeline.stages, mode=submission.mode)
                )
            except PipelineError as exc:
                raise SubmissionRefused(f"pipeline: {exc}", field="pipeline") from None
        try:
            snapshot = await capture_repository(self.bus, submission.repo)
        except WorkspaceError as exc:
            raise SubmissionRefused(f"cannot capture {submission.repo}: {exc}") from None
        task = make_task(
            submission.text,
            submission.repo,
            settings=settings,
            mode=submission.mode,
            snapshot=snapshot,
            pipeline=pipeline,
            submitter=Submitter(
                principal=submission.principal,
                instructions=not TaskOptions.from_arguments(submission.options).no_instructions,
            ),
        )
        return await self._publish_owned(submission.principal, task)

    async def _refuse_over_quota(self, principal: str) -> None:
        over = await quota_breach(self.bus, principal)
        if over is not None:
            raise SubmissionRefused(f"quota.exceeded: {over.describe()}; nothing was submitted")

    async def usage(self, principal: str, *, days: int) -> UsageReport:
        entry, quota = await center_quota(self.bus, principal)
        since = (datetime.now(UTC) - timedelta(days=days - 1)).date().isoformat()
        records = [d for d in await (await Ledger.open(self.bus)).days(principal) if d.day >= since]
        return UsageReport(
            principal=principal,
            quota=quota[0].model_dump(exclude_none=True) if quota else None,
            quota_key=quota[1] if quota else None,
            config_revision=entry.revision if entry else None,
            days=[
                DayUse(
                    day=d.day,
                    tasks=len(d.tasks),
                    running=len(d.running),
                    tokens=d.tokens,
                    cost_usd=d.cost_usd,
                    resets_at=resets_at(d.day).isoformat(),
                )
                for d in records
            ],
        )

    async def get(self, principal: str, task_id: str) -> TaskView | None:
        submitted_at = await self._submitted_at(principal, task_id)
        if submitted_at is None:
            return None
        return await self._view(task_id, submitted_at)

    async def cancel(self, principal: str, task_id: str) -> TaskView | None:
        view = await self.get(principal, task_id)
        if view is None or view.ended:
            return view
        await cancel_task(self.bus, task_id, reason=f"cancelled by {principal} through the tasks server")
        return view

    async def list(self, principal: str, *, status: str | None, limit: int) -> list[TaskView]:
        found = []
        for task_id in await self._own_ids(principal):
            submitted_at = await self._submitted_at(principal, task_id)
            if submitted_at is None:
                continue
            view = await self._view(task_id, submitted_at)
            if status is None or view.status == status:
                found.append((submitted_at, view))
        found.sort(key=lambda pair: pair[0], reverse=True)
        return [view for _, view in found[:limit]]

    async def answer(self, principal: str, task_id: str, request_id: str, *, approve: bool) -> bool | None:
        if await self._submitted_at(principal, task_id) is None:
            return None
        answered = await answer_confirmation(
            self.bus,
            task_id,
            approve=approve,
            request_id=request_id,
            by=f"{principal} through the tasks server",
        )
        return bool(answered)

    async def wait(
        self, principal: str, task_id: str, *, timeout_s: float, on_progress: OnProgress, until_question: bool
    ) -> TaskView | None:
        submitted_at = await self._submitted_at(principal, task_id)
        if submitted_at is None:
            return None
        async with follow(
            self.bus, subjects.task_events(task_id), after=None, idle_s=_RECONNECT_CHECK_S
        ) as events:
            view = await self._view(task_id, submitted_at)  # after subscribing: no event falls between
            if view.ended:
                return view
            with anyio.move_on_after(timeout_s):
                while True:
                    with anyio.move_on_after(IDLE_PROGRESS_S) as idle:
                        envelope = await _next_event(events)
                    if idle.cancelled_caught:
                        view = await self._view(task_id, submitted_at)
                        await on_progress(view, f"still {view.status}")
                        continue
                    if is_final(envelope):
                        return await self._final_view(task_id, submitted_at, envelope.payload)
                    view = await self._view(task_id, submitted_at)
                    await on_progress(view, _event_message(envelope))
                    if until_question and _asks(envelope) and view.pending_confirmation is not None:
                        return view
            return await self._view(task_id, submitted_at)

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[str]]:
        send, receive = anyio.create_memory_object_stream[str](1000)

        async def on_message(msg: _Subjected) -> None:
            parts = msg.subject.split(".")
            if len(parts) >= 4:
                try:
                    send.send_nowait(parts[2])
                except anyio.WouldBlock:  # nobody reads fast enough: a dropped ping, not a stuck bus
                    pass

        with nats_errors():
            sub = await self.bus.nc.subscribe(subjects.EVENTS_ALL, cb=on_message)
        try:
            async with receive:
                yield receive
        finally:
            send.close()
            with anyio.CancelScope(shield=True):
                try:
                    with nats_errors():
                        await sub.unsubscribe()
                except BusError:
                    pass

    # views

    async def _view(self, task_id: str, submitted_at: float) -> TaskView:
        state = await self.records.get(task_id)
        if state is None:  # published, not yet taken by the orchestrator
            return TaskView(
                task_id=task_id, status="submitted", elapsed_s=round(time.time() - submitted_at, 3)
            )
        return _view_of(state, submitted_at, await self._pending(state))

    async def _final_view(self, task_id: str, submitted_at: float, result: dict[str, JsonValue]) -> TaskView:
        view = await self._view(task_id, submitted_at)
        if view.ended:
            return view
        # The result event can overtake a reader of the record: the event is the truth.
        return view.model_copy(
            update={
                "status": result.get("status", view.status),
                "result": result,
                "pending_confirmation": None,
            }
        )

    async def _pending(self, state: TaskState) -> PendingConfirmation | None:
        if state.status in TERMINAL_STATUSES:
            return None
        pending = await pending_confirmation(self.bus, state.task_id)
        if pending is None:
            return None
        return PendingConfirmation(
            request_id=pending.request_id, question=pending.question, timeout_s=pending.timeout_s
        )


def _view_of(state: TaskState, submitted_at: float, pending: PendingConfirmation | None) -> TaskView:
    result = state.result.model_dump(mode="json") if state.result is not None else None
    if result is not None:
        elapsed = float(state.result.usage.get("wall_s") or (state.updated_at.timestamp() - submitted_at))  # pyright: ignore[reportOptionalMemberAccess] - result is not None here: checked on the line above
    else:
        elapsed = datetime.now(UTC).timestamp() - submitted_at
    return TaskView(
        task_id=state.task_id,
        status=state.status,
        stage=state.stage,
        step=state.step_seq,
        tokens=state.usage.tokens,
        elapsed_s=round(max(elapsed, 0.0), 3),
        mode=state.task.mode,
        pending_confirmation=pending,
        waiting_for=state.waiting_for,
        result=result,
        parent_task_id=state.task.continuation.parent_task_id if state.task.continuation else None,
    )


def _asks(envelope: Envelope) -> bool:
    return envelope.kind == "event" and envelope.payload.get("name") == "confirmation_requested"


def _event_message(envelope: Envelope) -> str:
    if envelope.kind == "event":
        return str(envelope.payload.get("message") or envelope.payload.get("name") or "event")
    return envelope.kind


async def _next_event(events: Follower) -> Envelope:
    """The next event that parses (the dead-letter path reports those that do not)."""
    while True:
        msg = await events.next()
        if msg is None:
            continue
        try:
            return parse_envelope(msg.data)
        except MalformedMessage:
            continue
