"""A task's status: where it stands, as its record, its events, `codeloop status`/`watch`, the
console and the tasks server's JSON show it.

Statuses come from two owners. The state machine owns the few that belong to no stage:
`submitted` (not started), `revising` (a judgement sent the patch back, told in an event) and the
terminal ones a task ends with. Every other status is a stage kind's: the kind declares the status
the task shows while a stage of its kind runs (`StageKind.statuses`: `planning` is the plan kind's,
`reviewing` the review kind's, a plug-in kind names its own). So `TaskStatus` is not a closed list:
it accepts any status-shaped name, and the installed kinds say which names a running task may
show (`agents.orchestrator.stages.known_statuses`). A record written by a task whose kind is not
installed here still loads: the reader shows the name without knowing the kind.

The names are a contract (clients compare them): a status once shown keeps its spelling.
"""

import re
from typing import Annotated, Literal, get_args

from pydantic import StringConstraints

STATUS_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
"""What a status name looks like: lowercase letters, digits and `_`, a letter first, at most 40
characters (`handed_off`, `counting`)."""

TaskStatus = Annotated[str, StringConstraints(pattern=STATUS_PATTERN)]
"""Where a task is: a machine status (`MACHINE_STATUSES`, `TERMINAL_STATUSES`) or one a stage kind
declares."""

EndStatus = Literal["done", "diagnosed", "handed_off", "failed", "cancelled", "rejected"]
"""How a task ends."""

TERMINAL_STATUSES: frozenset[str] = frozenset(get_args(EndStatus))
"""The statuses of an ended task: a record in one of them ignores every further input."""

MACHINE_STATUSES: tuple[str, ...] = ("submitted", "revising")
"""The statuses of no stage: not started yet, and sent back for a revision (an event's status
between a judgement and the code stage it returns to)."""

RESERVED_STATUSES: frozenset[str] = TERMINAL_STATUSES | frozenset(MACHINE_STATUSES)
"""Names no stage kind may declare: the machine gives them their meaning."""


def status_problem(name: object) -> str | None:
    """Why `name` cannot be a stage kind's status, or None when it can."""
    if not isinstance(name, str) or re.fullmatch(STATUS_PATTERN, name) is None:
        return f"the status {name!r} is not a lowercase word of at most 40 characters ({STATUS_PATTERN})"
    if name in RESERVED_STATUSES:
        return f"the status {name!r} is the state machine's own; a stage kind names another"
    return None
