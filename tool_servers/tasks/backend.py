"""The backend the tasks server is written against: where tasks go and where their state comes from.

The server owns the MCP side (tools, schemas, scopes, who is calling, confinement of `repo`);
the backend owns the tasks. codeloop's backend (`codeloop.services.tasks_backend`) keeps
everything on the bus: the submission, the owner of each task, its record, its events. The
server keeps no state, so a restarted server (or another replica) sees the same tasks.

The backend also says which options a task takes beyond its text, repository and mode (models,
budgets, a pipeline: `TasksBackend.task_options`): they are `submit_task`'s other arguments, so
the tool offers exactly what the backend understands, with its names, ranges and descriptions.

Every method takes the caller's principal: a task another principal submitted does not exist
for this one (None, never "forbidden": no oracle for other people's task ids).
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, JsonValue

from tool_servers.tasks.views import Mode, TaskView, UsageReport

OnProgress = Callable[[TaskView, str], Awaitable[None]]
"""Called by `wait` on every event of the task: the fresh view and the event's message."""


@dataclass(frozen=True)
class Submission:
    """A checked request to run a task, as the server hands it to the backend."""

    principal: str
    text: str
    repo: Path
    """Absolute, inside the server's root; captured as the task's snapshot at submission."""
    mode: Mode
    options: dict[str, JsonValue] = field(default_factory=dict)
    """The task options the client gave (`TasksBackend.task_options`' fields, by argument name:
    `model`, `max_steps`, `pipeline`, ...); those it left out are not here."""


class SubmissionRefused(ValueError):
    """The submission cannot run as given (unknown model, bad budget, unknown pipeline, a tree
    too large to capture); nothing was submitted. The message says what to change."""

    def __init__(self, message: str, **details: JsonValue) -> None:
        super().__init__(message)
        self.details = details

    @property
    def field(self) -> str | None:
        """The argument to change, when the refusal names one."""
        named = self.details.get("field")
        return named if isinstance(named, str) else None


class TooManyTasks(SubmissionRefused):
    """The principal already has its cap of unfinished tasks; nothing was submitted."""


class TaskStillRunning(SubmissionRefused):
    """The task to continue has not ended; nothing was submitted."""


class TasksBackend(Protocol):
    task_options: type[BaseModel]
    """The options a submission may carry beyond task, repo and mode: each field (all optional)
    is an argument of `submit_task`, with its description and range."""

    async def submit(self, submission: Submission) -> str:
        """Submit and return the task id at once (the task runs elsewhere).

        Raises:
            SubmissionRefused: see the class; `TooManyTasks` for the per-principal cap.
        """
        ...

    async def continue_task(
        self, principal: str, task_id: str, *, text: str | None, options: dict[str, JsonValue]
    ) -> str | None:
        """Submit a task that goes on from the principal's ended task `task_id` (its patch, plan
        and an account of it, with `text` as a new instruction and `options` as the new task's
        budgets and models); return the new task's id, or None when `task_id` is not the
        principal's.

        Raises:
            SubmissionRefused: invalid options; `TaskStillRunning` when the task has not ended;
                `TooManyTasks` for the per-principal cap.
        """
        ...

    async def get(self, principal: str, task_id: str) -> TaskView | None: ...

    async def wait(
        self, principal: str, task_id: str, *, timeout_s: float, on_progress: OnProgress, until_question: bool
    ) -> TaskView | None:
        """The view once the task ended or `timeout_s` passed; with `until_question`, also as
        soon as a confirmation is pending (someone has to answer it before the task goes on)."""
        ...

    async def cancel(self, principal: str, task_id: str) -> TaskView | None: ...

    async def list(self, principal: str, *, status: str | None, limit: int) -> list[TaskView]: ...

    async def answer(self, principal: str, task_id: str, request_id: str, *, approve: bool) -> bool | None:
        """Record the answer; True when it was recorded, False when that request is not pending
        (answered, timed out, unknown), None when the task is not the principal's."""
        ...

    async def usage(self, principal: str, *, days: int) -> UsageReport:
        """The principal's quota and its use of the last `days` UTC days."""
        ...

    def changes(self) -> "AsyncIteratorContext":
        """An async context manager yielding the ids of tasks as they change (each event)."""
        ...


class AsyncIteratorContext(Protocol):
    async def __aenter__(self) -> AsyncIterator[str]: ...

    async def __aexit__(self, *exc: object) -> bool | None: ...
