"""What the tasks server's tools take and return: the arguments of each tool and the task view.

These models are the tools' `inputSchema`/`outputSchema` (field docstrings become the
descriptions a client shows). `submit_task`'s arguments are `SubmitTaskArgs` plus the task options
its backend takes (`submit_task_args`). The view is what `get_task`, `wait_task`, `cancel_task`,
`list_tasks` and the resource `codeloop://tasks/{task_id}` return; its `result`, once the task
ended, is exactly the object `codeloop run --json` prints.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, create_model

Mode = Literal["read", "write", "execute"]
MAX_TASK_TEXT_CHARS = 96 * 1024
"""The bus's own limit on a task's text; longer texts are refused before anything is captured."""
MAX_WAIT_S = 3600.0
ENDED = frozenset({"done", "diagnosed", "handed_off", "failed", "cancelled", "rejected"})
"""The statuses a task ends with; it never leaves one."""

_ARGS = ConfigDict(extra="forbid", use_attribute_docstrings=True)
_OUT = ConfigDict(use_attribute_docstrings=True)


class SubmitTaskArgs(BaseModel):
    """What every submission names: the task, its repository and its mode (the server checks
    these); the backend's task options are added to it (`submit_task_args`)."""

    model_config = _ARGS

    task: str = Field(min_length=1, max_length=MAX_TASK_TEXT_CHARS)
    """What to do, in words: a question (read mode) or a change to make (write, execute)."""
    repo: str = "."
    """The repository, relative to the server's root (the root itself by default)."""
    mode: Mode = "read"
    """read: an answer only; write: a patch; execute: a patch checked by running the tests. May
    not exceed the grant: write needs the `write` scope, execute the `execute` scope."""

    def task_options(self) -> dict[str, JsonValue]:
        """The task options given (the fields beyond task, repo and mode that are not None)."""
        return self.model_dump(mode="json", exclude_none=True, exclude=set(SubmitTaskArgs.model_fields))


def submit_task_args(task_options: type[BaseModel]) -> type[SubmitTaskArgs]:
    """`submit_task`'s input model: `SubmitTaskArgs`, then every field of `task_options`."""
    fields: dict[str, Any] = {
        name: (info.annotation, info) for name, info in task_options.model_fields.items()
    }
    clash = set(fields) & set(SubmitTaskArgs.model_fields)
    if clash:
        raise ValueError(f"task options may not redefine {', '.join(sorted(clash))}")
    return create_model("SubmitTaskArgs", __base__=SubmitTaskArgs, **fields)


class TaskIdArgs(BaseModel):
    model_config = _ARGS

    task_id: str = Field(min_length=1, max_length=128)
    """The id `submit_task` returned."""


class ContinueTaskArgs(TaskIdArgs):
    """What `continue_task` takes: the ended task, a new instruction, and the new task's budgets
    and models (`continue_task_args` adds the backend's task options but the pipeline)."""

    task_id: str = Field(min_length=1, max_length=128)
    """The ended task to continue (`handed_off`, `failed`, `cancelled`, `done`): one of yours."""
    text: str | None = Field(default=None, max_length=MAX_TASK_TEXT_CHARS)
    """A new instruction, in words ("also handle the empty list"); None: go on with the same task."""

    def task_options(self) -> dict[str, JsonValue]:
        """The task options given (the fields beyond task_id and text that are not None)."""
        return self.model_dump(mode="json", exclude_none=True, exclude=set(ContinueTaskArgs.model_fields))


CONTINUE_KEEPS = frozenset({"pipeline"})
"""Task options a continued task takes from the task it continues, never from the caller."""


def continue_task_args(task_options: type[BaseModel]) -> type[ContinueTaskArgs]:
    """`continue_task`'s input model: `ContinueTaskArgs`, then the fields of `task_options` but
    those the continued task keeps (`CONTINUE_KEEPS`)."""
    fields: dict[str, Any] = {
        name: (info.annotation, info)
        for name, info in task_options.model_fields.items()
        if name not in CONTINUE_KEEPS
    }
    clash = set(fields) & set(ContinueTaskArgs.model_fields)
    if clash:
        raise ValueError(f"task options may not redefine {', '.join(sorted(clash))}")
    return create_model("ContinueTaskArgs", __base__=ContinueTaskArgs, **fields)


class WaitTaskArgs(TaskIdArgs):
    timeout_s: float = Field(default=60.0, ge=0, le=MAX_WAIT_S)
    """How long to wait for the task's end; when it passes, the view is returned as it is (not
    an error). Progress notifications keep a client's own request timeout from expiring."""


class ListTasksArgs(BaseModel):
    model_config = _ARGS

    status: str | None = None
    """Only tasks with this status (e.g. `done`, `coding`); None: every status."""
    limit: int = Field(default=50, ge=1, le=500)
    """At most this many tasks, the newest first."""


class AnswerConfirmationArgs(TaskIdArgs):
    request_id: str = Field(min_length=1, max_length=128)
    """The `pending_confirmation.request_id` of the task's view."""
    approve: bool
    """True allows the high-risk action; False refuses it."""


class PendingConfirmation(BaseModel):
    """A high-risk tool call inside the task waits for a person's answer."""

    model_config = _OUT

    request_id: str
    """Pass it to `answer_confirmation`."""
    question: str
    """What the tool call would do."""
    timeout_s: float
    """No answer within this many seconds (from the request) is a refusal."""


class TaskView(BaseModel):
    """Where a task is, and its result once it ended."""

    model_config = _OUT

    task_id: str
    status: str
    """`submitted` until the orchestrator takes it; then its stage (`planning`, `retrieving`,
    `coding`, `verifying`, ...) and finally `done`, `diagnosed`, `handed_off`, `failed`,
    `cancelled` or `rejected`."""
    stage: str | None = None
    """The pipeline stage in progress (`plan`, `retrieve`, `code`, `verify`, ...)."""
    step: int = 0
    """Steps dispatched so far."""
    tokens: int = 0
    """Model tokens used so far, input and output."""
    elapsed_s: float = 0.0
    """Seconds since the task was submitted (until its end, once it ended)."""
    mode: Mode | None = None
    """The mode it was submitted in."""
    pending_confirmation: PendingConfirmation | None = None
    """A high-risk action waiting for an answer (`answer_confirmation`), or None."""
    waiting_for: str | None = None
    """A role of the task's pipeline that no live worker serves: the task waits for one."""
    result: dict[str, JsonValue] | None = None
    """The `codeloop run --json` object once the task ended; None until then."""
    parent_task_id: str | None = None
    """The task this one continues (`continue_task`); None for a task that continues none."""

    @property
    def ended(self) -> bool:
        return self.result is not None or self.status in ENDED


class Submitted(BaseModel):
    model_config = _OUT

    task_id: str
    """Follow it with `wait_task`, `get_task` or the resource codeloop://tasks/{task_id}."""
    status: str
    """`submitted`: the orchestrator has not taken it yet (with the MCP tasks extension, once the
    task ended: how it ended)."""
    task: TaskView | None = None
    """Only in the final result of a `submit_task` run as an MCP task: the task's last view."""
    parent_task_id: str | None = None
    """From `continue_task`: the task the new one continues."""


class TaskList(BaseModel):
    model_config = _OUT

    tasks: list[TaskView]
    """The caller's own tasks, the newest first."""


class Answered(BaseModel):
    model_config = _OUT

    task_id: str
    request_id: str
    approved: bool
    """The answer that was recorded."""
    task: TaskView
    """The task's view after the answer."""


class UsageArgs(BaseModel):
    model_config = _ARGS

    days: int = Field(default=7, ge=1, le=90)
    """UTC days back from today."""


class DayUse(BaseModel):
    model_config = _OUT

    day: str
    """The UTC day, `YYYY-MM-DD`."""
    tasks: int
    """Tasks started that day."""
    running: int
    """Of them, still running."""
    tokens: int
    """Model tokens (input + output) of those tasks."""
    cost_usd: float
    """US dollars of model use of those tasks (0 where no price is known)."""
    resets_at: str
    """When the day's quotas start again (UTC, ISO 8601)."""


class UsageReport(BaseModel):
    """The caller's quota and what it used, per UTC day (`get_usage`)."""

    model_config = _OUT

    principal: str
    quota: dict[str, float] | None
    """The caller's limits (`max_running`, `tasks_per_day`, `tokens_per_day`, `cost_per_day_usd`,
    those set); None: no quota applies."""
    quota_key: str | None
    """Where the quota comes from in the configuration center (`quotas.NAME`, `quotas.default`)."""
    config_revision: int | None
    """The configuration center's current revision; None without one."""
    days: list[DayUse]
    """Newest first; days without a task are left out."""
