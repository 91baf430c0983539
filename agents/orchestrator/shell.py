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
from typing import Any

from agents.messages import TERMINAL_STATUSES, CancelTask, StepFailed, TaskResult, TaskState, TaskSubmitted
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
    ) -> None:
        self.records = records
        self.choose_pipeline = choose_pipeline
        self.clock = clock

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
        try:
            self.choose_pipeline(task)
        except PipelineError as exc:  # a client that did not check (any NATS client may submit)
            problems.append(str(exc))

        inherited = task.continuation if task.mode != "read" else None

        def claim(state: TaskState | None) -> TaskState | None:
            if state is not None:
                return None  # claimed before: a duplicate, or a redelivery after a crash
            return TaskState(
                task_id=envelope.task_id,
                status="rejected" if problems else "submitted",
                task=task,
                created_at=now,
                updated_at=now,
                trace_id=envelope.trace_id,
                error="; ".join(problems) or None,
                # A continued task's work so far is its parent's patch until its coder answers: a
                # task that ends before (a budget, a failed step) still hands back the whole change.
                patch=inherited.patch if inherited else None,
                files_changed=list(inherited.files_changed) if inherited else [],
                approvals=list(inherited.approvals) if inherited else [],
            )

        await self.records.update(envelope.task_id, claim)
        if problems:
            return await self._reject(delivery, problems)
        return await self._apply(delivery, Start())

    async def _reject(self, delivery: Delivery, problems: list[str]) -> list[Reply]:
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
            )
            return state.model_copy(update={"result": result, "updated_at": now})

        state = await self.records.update(envelope.task_id, finish)
        if state is None or state.status != "rejected" or state.result is None:
            return []
        return [
            Reply(
                subjects.event(envelope.task_id, "transition"),
                Event(name="transition", message=f"task rejected: {reason}", data={"status": "rejected"}),
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

        def change(state: TaskState | None) -> TaskState | None:
            applied.clear()
            if state is None:
                applied["missing"] = True
                return None
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
        if "ignored" in applied:
            if state.outbox_cause != envelope.id:
                log.info("task %s: ignored %s: %s", envelope.task_id, envelope.kind, applied["ignored"])
                return []
            # The same input again: the record moved on but its messages may not have gone out.
        return [_reply_of(item) for item in state.outbox]

    async def result_of(self, task_id: str) -> TaskResult | None:
        state = await self.records.get(task_id)
        return state.result if state and state.status in TERMINAL_STATUSES else None


def _outbox(commands: tuple[Command, ...], delivery: Delivery) -> tuple[list[dict[str, Any]], str | None]:
    """The replies of `commands` as plain data for the record, and the id the dispatch will carry."""
    task_id = delivery.envelope.task_id
    items: list[dict[str, Any]] = []
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


def _reply_of(item: dict[str, Any]) -> Reply:
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
) -> ActorSpec:
    """The orchestrator's actor; `pipeline` is the pipeline of every task submitted without one of
    its own (else `choose_pipeline` picks); a task's own pipeline (`TaskSubmitted.pipeline`) wins."""
    if pipeline is not None:
        fixed = pipeline
        choose_pipeline = lambda task: pipeline_for(task) if task.pipeline is not None else fixed  # noqa: E731
    orchestrator = Orchestrator(records, choose_pipeline=choose_pipeline)
    return ActorSpec(
        address=subjects.RoleAddress.orchestrator(),
        handler=orchestrator.handle,
        policy=policy or DeliveryPolicy(),
    )


__all__ = ["Orchestrator", "orchestrator_spec"]
