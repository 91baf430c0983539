"""The transition function's inputs and outputs, as data.

The shell (`shell.py`) hands the state machine (`machine.py`) an `Input`: the task started, a step
answered or failed, a cancel. The machine (and the stage kinds' reactions, `stages/`) answers with
`Command`s in an `Outcome`; only the shell turns them into messages, after the new record is written.
"""

from dataclasses import dataclass, field
from typing import Any

from agents.messages import TaskResult, TaskState, Usage
from bus.messages import Message


# ── inputs ──────────────────────────────────────────────────────────────────────────────────────
@dataclass(frozen=True)
class Start:
    """The record was just created from a submission."""


@dataclass(frozen=True)
class StepDone:
    step_id: str
    role: str
    payload: Message


@dataclass(frozen=True)
class StepFailure:
    step_id: str
    role: str
    failure_class: str
    message: str
    usage: Usage = Usage()


@dataclass(frozen=True)
class Cancel:
    reason: str


Input = Start | StepDone | StepFailure | Cancel


# ── commands ────────────────────────────────────────────────────────────────────────────────────
@dataclass(frozen=True)
class Dispatch:
    """Send `payload` to the workers of `role`."""

    role: str
    step_id: str
    payload: Message


@dataclass(frozen=True)
class Emit:
    """Publish an event on the task's event stream."""

    name: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Finish:
    """Publish the task's result: its stream ends here."""

    result: TaskResult


Command = Dispatch | Emit | Finish


@dataclass(frozen=True)
class Outcome:
    state: TaskState
    commands: tuple[Command, ...] = ()
    ignored: str | None = None
    """Why the input changed nothing (stale step, terminal task); None when it was applied."""
