"""A task whose stage has no live worker says so instead of waiting silently.

The watcher follows the tasks' `transition` events to know which tasks wait for a step (seeded
from the records when it starts). Every `interval_s`, for each such task whose current stage's
role has no live worker of our schema version (`bus.discovery`), it marks the record
(`waiting_for`), which `codeloop status` shows, and publishes a `waiting` event: `waiting for a
worker of role X` (with the refused workers' schema versions when there are only incompatible
ones). When a worker turns up the mark is cleared with another `waiting` event
(`data.waiting: false`). The work message itself stays queued on the role's durable consumer, so
the first worker to arrive takes it. Every change is a compare-and-set on the step the task
expects, and only the process whose write changed the record publishes the event, so several
orchestrator processes may each run one (they share the transition events as a queue group).
"""

import json
import logging
from datetime import UTC, datetime

import anyio
from anyio.abc import TaskStatus

from agents.messages import TERMINAL_STATUSES, TaskState
from agents.orchestrator.records import TaskRecords
from bus import subjects
from bus.connection import Bus, queue_subscription
from bus.discovery import WorkerInfo, discover, waiting_reason
from bus.envelope import Envelope
from bus.errors import BusError
from bus.messages import Event

log = logging.getLogger("codeloop.orchestrator")
INTERVAL_S = 1.0
TRANSITIONS = "codeloop.events.*.transition"


async def watch_waiting(
    bus: Bus, *, interval_s: float = INTERVAL_S, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Mark and unmark waiting tasks until cancelled; see the module docstring."""
    records = await TaskRecords.open(bus)
    active: set[str] = {s.task_id for s in await records.all() if s.status not in TERMINAL_STATUSES}
    async with queue_subscription(bus, TRANSITIONS, "codeloop-waiting") as transitions:
        task_status.started()
        while True:
            with anyio.move_on_after(interval_s):
                async for data in transitions:
                    _follow(active, data)
            try:
                await check_waiting(bus, records, active)
            except BusError as exc:  # a hiccup: look again next round
                log.debug("waiting check: %s", exc)


def _follow(active: set[str], data: bytes) -> None:
    try:
        envelope = json.loads(data)
        status = envelope["payload"]["data"].get("status")
        task_id = envelope["task_id"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return
    if status in TERMINAL_STATUSES:
        active.discard(task_id)
    else:
        active.add(task_id)


async def check_waiting(bus: Bus, records: TaskRecords, active: set[str]) -> None:
    """Mark or unmark each of the `active` tasks; those that ended leave the set."""
    workers: list[WorkerInfo] | None = None
    for task_id in sorted(active):
        state = await records.get(task_id)
        if state is None or state.status in TERMINAL_STATUSES:
            active.discard(task_id)
            continue
        if not state.expected_step or not state.stage_role:
            continue
        if workers is None:  # one discovery per round, and none while nothing waits for a step
            workers = await discover(bus)
        reason = waiting_reason(state.stage_role, workers)
        if (reason is None) != (state.waiting_for is None):
            await _mark(bus, records, state, reason)


async def _mark(bus: Bus, records: TaskRecords, seen: TaskState, reason: str | None) -> None:
    now = datetime.now(UTC)
    role = seen.stage_role or ""
    changed = False

    def change(state: TaskState | None) -> TaskState | None:
        nonlocal changed
        changed = False
        if state is None or state.status in TERMINAL_STATUSES or state.expected_step != seen.expected_step:
            return None  # it moved on meanwhile
        if (state.waiting_for is None) == (reason is None):
            return None  # another watcher marked it already
        changed = True
        return state.model_copy(update={"waiting_for": role if reason else None})

    await records.update(seen.task_id, change)
    if not changed:
        return
    message = reason or f"a worker of role {role} is live; the {seen.stage} step goes ahead"
    event = Event(
        name="waiting",
        message=message,
        data={
            "waiting": reason is not None,
            "role": role,
            "step_id": seen.expected_step,
            "stage": seen.stage,
            "at": now.isoformat(),
        },
    )
    envelope = Envelope.wrap(event, task_id=seen.task_id, trace_id=seen.trace_id)
    await bus.publish(subjects.event(seen.task_id, "waiting"), envelope)
