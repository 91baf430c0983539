"""Continue an ended task: the calls behind `codeloop continue`, the tasks server and the console.

    async with open_bus(config) as bus:
        continued = await continue_task(bus, "3f2a...", text="also handle the empty list",
                                        options=TaskOptions(max_steps=30))
        continued.task_id, continued.parent_task_id     # follow it as any task (`watch_task`)

`continue_task` reads the parent's record, refuses what cannot go on (`ContinueRefused`: no such
task, one still running, a rejected one), resolves the new task's budgets and models the way
`codeloop run` resolves them — fresh budgets from the options and the configuration, never the
parent's used-up ones; the parent's models unless the options name others — builds the linked
submission (`agents.continuing.continued_submission`: the same snapshot, the parent's patch as the
starting point, its plan, an account of it, the new instruction) and publishes it.
`continuation_of` is the same without the publishing: `codeloop continue` follows what it
publishes, the tasks server's backend (and the console through it) publishes under the
principal's ownership. What the new task inherits, and why, is said in `agents/continuing.py`.
"""

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from agents.client import new_task_id, submit_task
from agents.continuing import CONTINUABLE, CannotContinue, continued_submission
from agents.messages import TaskState, TaskSubmitted
from agents.orchestrator.records import TaskRecords
from bus import subjects
from bus.connection import Bus
from codeloop.config.checks import check_submission
from codeloop.config.errors import ConfigError
from codeloop.config.settings import load_settings
from codeloop.config.task_options import Naming, TaskOptions
from codeloop.errors import CodeloopError

MODEL_OPTIONS = ("model", "planner_model", "coder_model")
"""The options that, given, replace the parent's models (each resolved as `codeloop run` would)."""


class ContinueRefused(CodeloopError):
    """The task cannot be continued as asked; nothing was submitted. `reason` says why in one word
    (`unknown`, `running`, `rejected`, `invalid`) for callers that map it (exit 2, a tool error)."""

    def __init__(self, message: str, *, task_id: str, reason: str, status: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class ContinuedTask:
    """A continuation that was submitted."""

    task_id: str
    """The new task's id."""
    parent_task_id: str
    """The task it continues."""
    task: TaskSubmitted
    """The submission as published (its `continuation` says what it inherited)."""


async def parent_record(bus: Bus, task_id: str) -> TaskState:
    """The record of the task to continue, by its whole id.

    Raises:
        ContinueRefused: (`unknown`) no task has that id.
    """
    if not subjects.is_token(task_id):
        raise ContinueRefused(
            f"{task_id[:80]!r} is not a task id (letters, digits, '-' and '_')",
            task_id=task_id,
            reason="invalid",
        )
    state = await (await TaskRecords.open(bus)).get(task_id)
    if state is None:
        raise ContinueRefused(
            f"no task {task_id} to continue (`codeloop status` lists the tasks)",
            task_id=task_id,
            reason="unknown",
        )
    return state


def continuation_of(
    parent: TaskState,
    *,
    text: str | None = None,
    options: TaskOptions | None = None,
    naming: Naming = "flag",
    interactive: bool = False,
    credentials: bool = True,
) -> TaskSubmitted:
    """The checked submission continuing `parent` (not yet published).

    Raises:
        ContinueRefused: the parent is running (`running`) or was rejected (`rejected`), or the
            options or the configuration are invalid (`invalid`: a budget out of range, a model
            that cannot be resolved; the message names the option as `naming` spells it).
    """
    options = options or TaskOptions()
    if options.pipeline is not None:
        raise ContinueRefused(
            "a continued task keeps its parent's pipeline: leave out the pipeline",
            task_id=parent.task_id,
            reason="invalid",
        )
    try:
        settings = load_settings(repo=Path(parent.task.repo), flags=options.layer(naming))
        given_models = any(getattr(options, name) is not None for name in MODEL_OPTIONS)
        task = continued_submission(
            parent,
            instruction=text,
            budgets=settings.budgets,
            models=settings.models if given_models else None,
            require_verified=(settings.verification.require == "passed")
            if options.require_verified is not None
            else None,
            interactive=interactive,
        )
        check_submission(task, settings=settings, credentials=credentials)
    except CannotContinue as exc:
        ended = exc.status in CONTINUABLE  # an ended task refused for its size, not its status
        reason = "rejected" if exc.status == "rejected" else "invalid" if ended else "running"
        raise ContinueRefused(str(exc), task_id=parent.task_id, reason=reason, status=exc.status) from None
    except ConfigError as exc:
        raise ContinueRefused(str(exc), task_id=parent.task_id, reason="invalid") from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, first["loc"]))
        raise ContinueRefused(
            f"invalid continuation: {where}: {first['msg']}", task_id=parent.task_id, reason="invalid"
        ) from None
    return task


async def continue_task(
    bus: Bus,
    task_id: str,
    *,
    text: str | None = None,
    options: TaskOptions | None = None,
    naming: Naming = "flag",
    interactive: bool = False,
    credentials: bool = True,
    new_id: str | None = None,
) -> ContinuedTask:
    """Submit a task that goes on from the ended task `task_id` (its whole id), with the new
    instruction `text` if given; returns at once (follow it with `agents.client.watch_task`).

    `options` are the new task's budgets and models as given (the configuration gives the rest);
    `naming` says how an error names them (`flag`: `--max-steps`; `argument`: `max_steps`);
    `credentials=False` leaves the model keys to the workers (a submitter on a remote bus).

    Raises:
        ContinueRefused: no such task, a task still running or rejected, invalid options.
    """
    parent = await parent_record(bus, task_id)
    task = continuation_of(
        parent, text=text, options=options, naming=naming, interactive=interactive, credentials=credentials
    )
    envelope, _ = await submit_task(bus, task, task_id=new_id or new_task_id())
    return ContinuedTask(task_id=envelope.task_id, parent_task_id=parent.task_id, task=task)


__all__ = ["ContinueRefused", "ContinuedTask", "continuation_of", "continue_task", "parent_record"]
