"""The orchestrator: claims submitted tasks and drives each one's state machine through its record.

Minimal for now: submitted → (work for the `echo` role) → done. Every transition is written to
the task's KV record (compare-and-set) *before* acting on it and then announced on
`codeloop.events.<task_id>.*`, so a restarted orchestrator, given the redelivered message, resumes
from the record: a step already taken is recognised and not repeated, and the messages it
republishes carry the same ids as before (`Delivery.derived_id`), which JetStream deduplicates.
Later issues add planning, retrieval, coding and verification as further states.
"""

from datetime import UTC, datetime

from agents.echo import ROLE as ECHO_ROLE
from bus import subjects
from bus.actor import ActorSpec, Delivery
from bus.errors import MalformedMessage
from bus.messages import (
    TERMINAL_STATUSES,
    EchoRequest,
    EchoResult,
    Event,
    TaskResult,
    TaskState,
    TaskSubmitted,
)
from bus.records import TaskRecords


def _now() -> datetime:
    return datetime.now(UTC)


class Orchestrator:
    def __init__(self, records: TaskRecords) -> None:
        self.records = records

    async def handle(self, delivery: Delivery) -> None:
        message = delivery.envelope.open()
        if isinstance(message, TaskSubmitted):
            await self._on_submitted(delivery, message)
        elif isinstance(message, EchoResult):
            await self._on_echo_result(delivery, message)
        else:
            raise MalformedMessage(f"the orchestrator does not handle {delivery.envelope.kind}")

    async def _on_submitted(self, delivery: Delivery, task: TaskSubmitted) -> None:
        envelope = delivery.envelope
        created = _now()

        def claim(state: TaskState | None) -> TaskState | None:
            if state is not None:
                return None  # already claimed: resume from the record below
            return TaskState(
                task_id=envelope.task_id,
                status="submitted",
                task=task,
                created_at=created,
                updated_at=created,
            )

        state = await self.records.update(envelope.task_id, claim)
        if state is None or state.status != "submitted":
            return  # a duplicate of a task that has moved on
        await self._event(
            delivery, "transition", f"task submitted: {task.text[:80]}", {"status": "submitted"}
        )
        work = envelope.reply(EchoRequest(text=task.text), id=delivery.derived_id("echo"))
        await delivery.publish(subjects.work(ECHO_ROLE), work)

    async def _on_echo_result(self, delivery: Delivery, result: EchoResult) -> None:
        envelope = delivery.envelope
        outcome = TaskResult(status="done", answer=result.text, trace_id=envelope.trace_id)

        def finish(state: TaskState | None) -> TaskState | None:
            if state is None or state.status in TERMINAL_STATUSES:
                return None
            return state.model_copy(update={"status": "done", "result": outcome, "updated_at": _now()})

        state = await self.records.update(envelope.task_id, finish)
        if state is None or state.result is None:
            raise MalformedMessage(f"echo result for unknown task {envelope.task_id}")
        await self._event(delivery, "transition", "task done", {"status": state.status})
        await delivery.publish(
            subjects.event(envelope.task_id, "result"),
            envelope.reply(state.result, id=delivery.derived_id("result")),
        )

    async def _event(self, delivery: Delivery, name: str, message: str, data: dict) -> None:
        event = Event(name=name, message=message, data=data)
        await delivery.publish(
            subjects.event(delivery.envelope.task_id, name),
            delivery.envelope.reply(event, id=delivery.derived_id(f"event-{name}")),
        )


def orchestrator_spec(records: TaskRecords, **policy: object) -> ActorSpec:
    return ActorSpec(
        address=subjects.RoleAddress.orchestrator(),
        handler=Orchestrator(records).handle,
        **policy,  # type: ignore[arg-type]
    )
