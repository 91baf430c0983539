"""The orchestrator's I/O shell around the pure transition function (`machine.py`).

For every message on `codeloop.task.>` it reads the task's record, computes the transition,
compare-and-sets the new record — with the messages to publish kept in its `outbox` — and only
then returns those messages for the runtime to publish (under ids derived from the input's id).
A crash after the write and before the publish is repaired by the redelivery of the same input:
the record already moved on, the transition is ignored, and the shell republishes the outbox the
same input produced, under the same ids, which JetStream stores once.
"""

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from agents.messages import (
    TERMINAL_STATUSES,
    CancelTask,
    OutboxItem,
    QuotaAllowance,
    StepFailed,
    TaskResult,
    TaskState,
    TaskSubmitted,
)
from agents.orchestrator.center import CenterLayer, NoCenter, Settled
from agents.orchestrator.io import (
    Cancel,
    Command,
    Dispatch,
    Emit,
    Finish,
    Input,
    Start,
    StepDone,
    StepFailure,
)
from agents.orchestrator.machine import transition
from agents.orchestrator.pipeline import Pipeline, PipelineError, pipeline_for
from agents.orchestrator.records import TaskRecords
from agents.orchestrator.stages import result_types
from agents.quotas import LOCAL_PRINCIPAL, Ledger, Quota, allowance, breach, utc_day
from bus import subjects
from bus.actor import ActorSpec, Delivery, DeliveryPolicy, Reply
from bus.errors import MalformedMessage
from bus.messages import Event, Message, payload_model
from bus.validation import submission_problems

log = logging.getLogger("codeloop.orchestrator")


def _now() -> datetime:
    return datetime.now(UTC)


class Orchestrator:
    def __init__(
        self,
        records: TaskRecords,
        *,
        choose_pipeline: Callable[[TaskSubmitted], Pipeline] = pipeline_for,
        clock: Callable[[], datetime] = _now,
        center: CenterLayer | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.records = records
        self.choose_pipeline = choose_pipeline
        self.clock = clock
        self.center: CenterLayer = center or NoCenter()
        """The configuration center a task is settled under when it is claimed."""
        self.ledger = ledger
        """The quota ledger; None: nothing is counted and no quota applies."""

    async def handle(self, delivery: Delivery) -> list[Reply]:
        envelope = delivery.envelope
        message = envelope.open()
        if isinstance(message, TaskSubmitted):
            return await self._on_submitted(delivery, message)
        if isinstance(message, CancelTask):
            return await self._apply(delivery, Cancel(message.reason))
        role = _role_of(delivery.subject)
        if isinstance(message, StepFailed):
            event: Input = StepFailure(
                message.step_id, message.role, message.failure_class, message.message, message.usage
            )
            return await self._apply(delivery, event)
        if isinstance(message, result_types()):  # what the installed stage kinds answer with
            step_id = getattr(message, "step_id", None) or await self._step_of(
                envelope.task_id, envelope.causation_id
            )
            return await self._apply(delivery, StepDone(step_id or "", role, message))
        raise MalformedMessage(f"the orchestrator does not take {envelope.kind} messages")

    async def _on_submitted(self, delivery: Delivery, task: TaskSubmitted) -> list[Reply]:
        envelope = delivery.envelope
        now = self.clock()
        problems = submission_problems(
            task_id=envelope.task_id, text=task.text, repo=task.repo, mode=task.mode
        )
        principal = task.principal or LOCAL_PRINCIPAL
        claimed = await self.records.get(envelope.task_id)
        # The center's current revision, taken once: the task keeps it for its whole life.
        settled = Settled(task, None) if claimed is not None else self.center.settle(task, principal)
        try:
            self.choose_pipeline(settled.task)
        except PipelineError as exc:  # a client that did not check (any NATS client may submit)
            problems.append(str(exc))
        day = utc_day(now)
        failure_class = None
        quota = None
        if claimed is None and self.ledger is not None and not problems:
            reached = await self.ledger.admit(
                principal,
                day,
                envelope.task_id,
                lambda used: (
                    breach(settled.quota, settled.quota_key, used, starting=True) if settled.quota else None
                ),
            )
            if reached is not None:
                problems.append(reached.describe())
                failure_class = "quota.exceeded"
            elif settled.quota is not None:
                used = await self.ledger.day(principal, day)
                quota = allowance(settled.quota, settled.quota_key, used, envelope.task_id)

        inherited = task.continuation if task.mode != "read" else None

        def claim(state: TaskState | None) -> TaskState | None:
            if state is not None:
                return None  # claimed before: a duplicate, or a redelivery after a crash
            return TaskState(
                task_id=envelope.task_id,
                status="rejected" if problems else "submitted",
                task=settled.task,
                created_at=now,
                updated_at=now,
                trace_id=envelope.trace_id,
                error="; ".join(problems) or None,
                # A continued task's work so far is its parent's patch until its coder answers: a
                # task that ends before (a budget, a failed step) still hands back the whole change.
                patch=inherited.patch if inherited else None,
                files_changed=list(inherited.files_changed) if inherited else [],
                config_revision=settled.revision,
                principal=principal,
                usage_day=day if self.ledger is not None and not problems else None,
                quota=quota,
                approvals=list(inherited.approvals) if inherited else [],
            )

        await self.records.update(envelope.task_id, claim)
        if problems:
            return await self._reject(delivery, problems, failure_class=failure_class)
        return await self._apply(delivery, Start())

    async def _reject(
        self, delivery: Delivery, problems: list[str], *, failure_class: str | None = None
    ) -> list[Reply]:
        envelope = delivery.envelope
        now = self.clock()
        reason = "; ".join(problems)

        def finish(state: TaskState | None) -> TaskState | None:
            if state is None or state.result is not None or state.status != "rejected":
                return None
            result = TaskResult(
                task_id=state.task_id,
                status="rejected",
                mode=state.task.mode,
                report=f"Rejected: {reason}",
                trace_id=state.trace_id,
                failure_class=failure_class,
                config_revision=state.config_revision,
            )
            return state.model_copy(update={"result": result, "updated_at": now})

        state = await self.records.update(envelope.task_id, finish)
        if state is None or state.status != "rejected" or state.result is None:
            return []
        return [
            Reply(
                subjects.event(envelope.task_id, "transition"),
                Event(
                    name="transition",
                    message=f"task rejected: {reason}",
                    data={"status": "rejected", "failure_class": failure_class},
                ),
                label="rejected-event",
            ),
            Reply(subjects.event(envelope.task_id, "result"), state.result, label="rejected-result"),
        ]

    async def _step_of(self, task_id: str, causation_id: str | None) -> str | None:
        """The step a result without a `step_id` answers (a custom role's reply), from the id of the
        request it was caused by."""
        state = await self.records.get(task_id)
        if state is None or causation_id is None:
            return None
        return state.expected_step if state.outbox_request_id == causation_id else None

    async def _apply(self, delivery: Delivery, event: Input) -> list[Reply]:
        envelope = delivery.envelope
        now = self.clock()
        applied: dict[str, object] = {}
        quota = await self._quota_now(envelope.task_id)

        def change(state: TaskState | None) -> TaskState | None:
            applied.clear()
            if state is None:
                applied["missing"] = True
                return None
            if quota is not None and state.quota is not None:
                state = state.model_copy(update={"quota": quota})
            outcome = transition(state, event, pipeline=self.choose_pipeline(state.task), now=now)
            if outcome.ignored is not None:
                applied["ignored"] = outcome.ignored
                return None
            outbox, request_id = _outbox(outcome.commands, delivery)
            return outcome.state.model_copy(
                update={"outbox": outbox, "outbox_cause": envelope.id, "outbox_request_id": request_id}
            )

        state = await self.records.update(envelope.task_id, change)
        if applied.get("missing"):
            raise MalformedMessage(f"{envelope.kind} for unknown task {envelope.task_id}")
        if state is None:
            return []
        await self._count(state)
        if "ignored" in applied:
            if state.outbox_cause != envelope.id:
                log.info("task %s: ignored %s: %s", envelope.task_id, envelope.kind, applied["ignored"])
                return []
            # The same input again: the record moved on but its messages may not have gone out.
        return [_reply_of(item) for item in state.outbox]

    async def _quota_now(self, task_id: str) -> QuotaAllowance | None:
        """The task's quota with the principal's other tasks' use as the ledger has it now."""
        if self.ledger is None:
            return None
        state = await self.records.get(task_id)
        if (
            state is None
            or state.quota is None
            or state.usage_day is None
            or state.status in TERMINAL_STATUSES
        ):
            return None
        used = await self.ledger.day(state.principal, state.usage_day)
        limits = Quota(
            tokens_per_day=state.quota.tokens_per_day, cost_per_day_usd=state.quota.cost_per_day_usd
        )
        return allowance(limits, state.quota.key, used, task_id)

    async def _count(self, state: TaskState) -> None:
        """The task's usage so far into the principal's ledger (set, not added: a redelivered
        input writes the same total again)."""
        if self.ledger is None or state.usage_day is None:
            return
        running = state.status not in TERMINAL_STATUSES
        await self.ledger.record(
            state.principal, state.usage_day, state.task_id, state.usage, running=running
        )

    async def result_of(self, task_id: str) -> TaskResult | None:
        state = await self.records.get(task_id)
        return state.result if state and state.status in TERMINAL_STATUSES else None


def _outbox(commands: tuple[Command, ...], delivery: Delivery) -> tuple[list[OutboxItem], str | None]:
    """The replies of `commands` as plain data for the record, and the id the dispatch will carry."""
    task_id = delivery.envelope.task_id
    items: list[OutboxItem] = []
    request_id = None
    for i, command in enumerate(commands):
        if isinstance(command, Dispatch):
            subject, payload, label = (
                subjects.work(command.role),
                command.payload,
                f"{i}-dispatch-{command.step_id}",
            )
            request_id = delivery.derived_id(label)
        elif isinstance(command, Emit):
            subject = subjects.event(task_id, command.name)
            payload, label = (
                Event(name=command.name, message=command.message, data=command.data),
                f"{i}-event",
            )
        elif isinstance(command, Finish):  # pyright: ignore[reportUnnecessaryIsInstance] - the else is a guard for a command added later
            subject, payload, label = subjects.event(task_id, "result"), command.result, f"{i}-result"
        else:  # pragma: no cover - the machine has no other commands
            raise TypeError(command)
        items.append(
            {
                "subject": subject,
                "kind": payload.kind,  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType] - every payload model declares its literal kind; the base cannot without narrowing it
                "payload": payload.model_dump(mode="json"),
                "label": label,
            }
        )
    return items, request_id


def _reply_of(item: OutboxItem) -> Reply:
    model = payload_model(item["kind"])
    if model is None:  # pragma: no cover - every kind we write is registered
        raise MalformedMessage(f"outbox holds unknown kind {item['kind']!r}")
    payload: Message = model.model_validate(item["payload"])
    return Reply(item["subject"], payload, label=item["label"])


def _role_of(subject: str) -> str:
    prefix = "codeloop.task.result."
    return subject[len(prefix) :] if subject.startswith(prefix) else "unknown"


def orchestrator_spec(
    records: TaskRecords,
    *,
    policy: DeliveryPolicy | None = None,
    pipeline: Pipeline | None = None,
    choose_pipeline: Callable[[TaskSubmitted], Pipeline] = pipeline_for,
    center: CenterLayer | None = None,
    ledger: Ledger | None = None,
) -> ActorSpec:
    """The orchestrator's actor; `pipeline` is the pipeline of every task submitted without one of
    its own (else `choose_pipeline` picks); a task's own pipeline (`TaskSubmitted.pipeline`) wins."""
    if pipeline is not None:
        fixed = pipeline
        choose_pipeline = lambda task: pipeline_for(task) if task.pipeline is not None else fixed  # noqa: E731
    orchestrator = Orchestrator(records, choose_pipeline=choose_pipeline, center=center, ledger=ledger)
    return ActorSpec(
        address=subjects.RoleAddress.orchestrator(),
        handler=orchestrator.handle,
        policy=policy or DeliveryPolicy(),
    )


__all__ = ["Orchestrator", "orchestrator_spec"]
