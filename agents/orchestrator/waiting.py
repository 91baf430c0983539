"""A task whose stage has no live worker says so instead of waiting silently.

Every `interval_s` the watcher looks at the tasks in progress; for each whose current stage's role
has no live worker of our schema version (`bus.discovery`), it marks the record
(`waiting_for`), which `codeloop status` shows, and publishes a `waiting` event: `waiting for a
worker of role X` (with the refused workers' schema versions when there are only incompatible
ones). When a worker turns up the mark is cleared with another `waiting` event
(`data.waiting: false`). The work message itself stays queued on the role's durable consumer,
so the first worker to arrive takes it. Every change is a compare-and-set on the step the task
expects, so several orchestrator processes may each run one.
"""

import logging
from datetime import UTC, datetime

import anyio
from anyio.abc import TaskStatus

from agents.messages import TERMINAL_STATUSES, TaskState
from agents.records import TaskRecords
from bus import subjects
from bus.connection import Bus
from bus.discovery import discover, waiting_reason
from bus.envelope import Envelope
from bus.errors import BusError
from bus.messages import Event

log = logging.getLogger("codeloop.orchestrator")
INTERVAL_S = 1.0


async def watch_waiting(
    bus: Bus, *, interval_s: float = INTERVAL_S, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Mark and unmark waiting tasks until cancelled; see the module docstring."""
    records = await TaskRecords.open(bus)
    task_status.started()
    while True:
        try:
            await check_waiting(bus, records)
        except BusError as exc:  # a hiccup: look again next round
            log.debug("waiting check: %s", exc)
        await anyio.sleep(interval_s)


async def check_waiting(bus: Bus, records: TaskRecords) -> None:
    active = [
        s for s in await records.all()
        if s.status not in TERMINAL_STATUSES and s.expected_step and s.stage_role
    ]  # fmt: skip
    if not active:
        return
    workers = await discover(bus)
    for state in active:
        reason = waiting_reason(state.stage_role or "", workers)
        if (reason is None) == (state.waiting_for is None):
            continue
        await _mark(bus, records, state, reason)


async def _mark(bus: Bus, records: TaskRecords, seen: TaskState, reason: str | None) -> None:
    now = datetime.now(UTC)
    role = seen.stage_role or ""

    def change(state: TaskState | None) -> TaskState | None:
        if state is None or state.status in TERMINAL_STATUSES or state.expected_step != seen.expected_step:
            return None  # it moved on meanwhile
        return state.model_copy(update={"waiting_for": role if reason else None})

    updated = await records.update(seen.task_id, change)
    if updated is None or (updated.waiting_for is None) != (reason is None):
        return
    message = reason or f"a worker of role {role} is live; the {seen.stage} step goes ahead"
    event = Event(
        name="waiting", message=message,
        data={"waiting": reason is not None, "role": role, "step_id": seen.expected_step, "stage": seen.stage,
              "at": now.isoformat()},
    )  # fmt: skip
    envelope = Envelope.wrap(event, task_id=seen.task_id, trace_id=seen.trace_id)
    await bus.publish(subjects.event(seen.task_id, "waiting"), envelope)
