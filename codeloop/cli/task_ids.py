"""How every command that takes a task id finds the task: the whole id or a unique prefix of it.

`watch`, `status`, `show`, `trace`, `replay`, `cancel`, `approve` and `deny` all go through
`find_task`, so they agree on what an id means and fail alike:
- a unique prefix stands for the whole id (as git takes a short commit id);
- a prefix several tasks share is a usage error (exit 2) listing some of them;
- a text that cannot be (a prefix of) an id is a usage error before anything connects
  (`checked_id`);
- an id nothing knows is `error: no task ID` (exit 1), after a few seconds' grace: a task that
  was just submitted may not have its record yet. A submission still queued for the orchestrator
  (no serve is running) counts as known.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from codeloop.cli.common import fail, usage_error

if TYPE_CHECKING:
    from agents.messages import TaskState
    from agents.orchestrator.records import TaskRecords
    from bus.connection import Bus


GRACE_S = 3.0
"""How long an unknown id is looked for before it is an error: a running orchestrator writes a
submitted task's record within milliseconds."""
POLL_S = 0.2
MAX_QUEUED_SCAN = 1000
"""Most queued submissions looked through for the id (a serve drains the queue at once)."""


def checked_id(given: str) -> str:
    """`given` when it can be a task id or a prefix of one (letters, digits, '-' and '_').

    Raises:
        typer.Exit: (2) it cannot: said before any connection is made.
    """
    from bus.validation import task_id_problems

    problems = [p for p in task_id_problems(given) if "reserved" not in p]
    if problems:
        raise usage_error(problems[0])
    return given


@dataclass(frozen=True)
class FoundTask:
    """A task `find_task` found: its whole id and its record (None while it is only queued)."""

    task_id: str
    state: "TaskState | None"


async def find_task(bus: "Bus", given: str, *, grace_s: float = GRACE_S) -> FoundTask:
    """The task `given` names on `bus` (see the module docstring).

    Raises:
        typer.Exit: (2) not an id, or a prefix of several tasks; (1) no such task.
    """
    from agents.orchestrator.records import TaskRecords
    from bus import subjects

    if not subjects.is_token(given):
        raise usage_error(f"{given[:80]!r} is not a task id (letters, digits, '-' and '_')")
    records = await TaskRecords.open(bus)
    found = await _lookup(records, given)
    if found is None and await _queued(bus, given):
        return FoundTask(given, None)
    with anyio.move_on_after(grace_s):
        while found is None:
            await anyio.sleep(POLL_S)
            found = await _lookup(records, given)
    if found is not None:
        return found
    raise fail(f"no task {given} (`codeloop status` lists the tasks)")


async def lookup_task(bus: "Bus", given: str) -> FoundTask | None:
    """The task with a record that `given` names (its whole id or a unique prefix), at once; None
    when none has (no grace, no look at the queue: for commands about ended tasks).

    Raises:
        typer.Exit: (2) a prefix of several tasks.
    """
    from agents.orchestrator.records import TaskRecords

    return await _lookup(await TaskRecords.open(bus), given)


async def _lookup(records: "TaskRecords", given: str) -> FoundTask | None:
    state = await records.get(given)
    if state is not None:
        return FoundTask(given, state)
    matches = await records.ids_starting_with(given)
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise usage_error(f"task id prefix {given!r} fits {len(matches)} tasks ({shown}); give more of it")
    if matches:
        state = await records.get(matches[0])
        return FoundTask(matches[0], state) if state is not None else None
    return None


async def _queued(bus: "Bus", task_id: str) -> bool:
    """True when a submission of `task_id` waits in the task stream for an orchestrator."""
    from bus import subjects
    from bus.connection import MSG_ID_HEADER
    from bus.errors import BusError
    from bus.stored import message_at, sequence_range

    try:
        first, last = await sequence_range(bus, subjects.TASKS_STREAM)
        for seq in range(max(first, last - MAX_QUEUED_SCAN + 1), last + 1):
            try:
                msg = await message_at(bus, subjects.TASKS_STREAM, seq)
            except BusError:
                continue  # taken off the work queue meanwhile
            if msg.subject == subjects.TASK_SUBMIT and msg.headers.get(MSG_ID_HEADER) == task_id:
                return True
    except BusError:
        return False
    return False


def ended_how(state: "TaskState") -> str:
    """`done`, `handed_off (budget.steps)`, ...: how an ended task ended, for messages."""
    result = state.result
    failure = result.failure_class if result is not None else None
    return state.status + (f" ({failure})" if failure else "")
