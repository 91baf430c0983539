"""Tasks whose messages were given up end visibly: no record stays `submitted` forever.

A submission the orchestrator cannot take (malformed, another schema version, a handler error at
its last delivery) is dead-lettered by the runtime. This watcher turns that dead letter into a
`rejected` task record with the reason and a `TaskResult`, so `watch` ends (non-zero) and
`status` shows why. A dead-lettered *result* of a live task would leave it waiting for ever; the
task is failed as `env.infra` instead. Every change is a compare-and-set that leaves a record which
has already ended alone, so several orchestrator processes may each run one.
"""

import json
import logging
from datetime import UTC, datetime

import anyio
from anyio.abc import TaskStatus

from agents.messages import TERMINAL_STATUSES, TaskResult, TaskState, TaskSubmitted
from agents.orchestrator.records import TaskRecords
from agents.orchestrator.report import build_result
from bus import subjects
from bus.connection import Bus, queue_subscription
from bus.dead_letters import UNKNOWN_TASK
from bus.envelope import Envelope
from bus.errors import BusError
from bus.messages import DeadLetter, Event

log = logging.getLogger("codeloop.orchestrator")
DEAD_LETTERS = "codeloop.events.*.dead_letter"


async def watch_rejections(bus: Bus, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Follow dead letters until cancelled; see the module docstring."""
    records = await TaskRecords.open(bus)
    async with queue_subscription(bus, DEAD_LETTERS, "codeloop-rejections") as letters:
        task_status.started()
        async for data in letters:
            try:
                await _settle(bus, records, data)
            except (BusError, ValueError) as exc:  # one bad letter must not stop the watcher
                log.warning("could not settle a dead letter: %s", exc)


async def _settle(bus: Bus, records: TaskRecords, data: bytes) -> None:
    envelope = Envelope.model_validate(json.loads(data))
    letter = DeadLetter.model_validate(envelope.payload)
    task_id = envelope.task_id
    if task_id == UNKNOWN_TASK or not subjects.is_token(task_id):
        return  # nothing names a task to end
    now = datetime.now(UTC)
    if letter.subject == subjects.TASK_SUBMIT:
        change = _rejecting(task_id, letter, now)
    elif letter.subject.startswith("codeloop.task."):
        change = _failing(letter, now)
    else:
        return  # work for a role: its StepFailed at the last delivery already told the task
    state = await records.update(task_id, change)
    if state is None or state.result is None or state.updated_at != now:
        return
    for name, payload in (
        (
            "transition",
            Event(
                name="transition",
                message=f"task {state.status}: {state.result.report[:200]}",
                data={"status": state.status},
            ),
        ),
        ("result", state.result),
    ):
        reply = envelope.reply(payload, id=f"{envelope.id}-{name}")
        await bus.publish(subjects.event(task_id, name), reply)


def _rejecting(task_id: str, letter: DeadLetter, now: datetime):
    reason = f"rejected ({letter.reason}): {letter.error[:500]}"

    def change(state: TaskState | None) -> TaskState | None:
        if state is not None and state.status in TERMINAL_STATUSES:
            return None
        task = state.task if state is not None else _unreadable(letter)
        result = TaskResult(task_id=task_id, status="rejected", mode=task.mode, report=reason)
        return TaskState(
            task_id=task_id,
            status="rejected",
            task=task,
            created_at=state.created_at if state else now,
            updated_at=now,
            error=reason,
            result=result,
        )

    return change


def _failing(letter: DeadLetter, now: datetime):
    reason = f"a message of this task was given up ({letter.reason}): {letter.error[:500]}"

    def change(state: TaskState | None) -> TaskState | None:
        if state is None or state.status in TERMINAL_STATUSES:
            return None
        ended = state.model_copy(
            update={"status": "failed", "expected_step": None, "updated_at": now, "error": reason}
        )
        return ended.model_copy(
            update={"result": build_result(ended, failure_class="env.infra", report=reason, now=now)}
        )

    return change


def _unreadable(letter: DeadLetter) -> TaskSubmitted:
    """A stand-in for a submission that could not be read, so the record can say it was rejected."""
    try:
        payload = json.loads(letter.data).get("payload", {})
        return TaskSubmitted.model_validate(payload)
    except (ValueError, AttributeError):
        pass
    return TaskSubmitted(text=f"(unreadable submission) {letter.data[:200]}", repo="/unknown")
