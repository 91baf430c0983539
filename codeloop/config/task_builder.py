"""The one place a task is made: a `TaskSubmitted` from what its submitter chose.

Every way in builds its task here — `codeloop run` and `codeloop submit`
(`codeloop.cli.task_options`), the tasks server's `submit_task` (`codeloop.services.tasks_backend`),
`codeloop eval`, `codeloop swebench --model`, and the probes the configuration checks look at — so
a setting reaches the task the same way whichever is used. What the submitter gives (`TaskOptions`:
flags, or a client's arguments) is the top layer of the configuration; the environment, the
repository's `codeloop.toml` and the user's `config.toml` give the rest (`task_settings`). The task
carries the resolved models and budgets, and `[verification] require = "passed"` as
`require_verified`.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agents.messages import McpServer, Mode, PipelineChoice, TaskSubmitted
from agents.workspace import SnapshotRef
from codeloop.config.settings import Settings, load_settings
from codeloop.config.task_options import Naming, TaskOptions


def task_settings(options: TaskOptions, *, repo: Path | None = None, naming: Naming = "flag") -> Settings:
    """The settings of a task submitted with `options` (spelled as `naming`: flags or a client's
    arguments) on `repo` (default: the current directory's configuration).

    Raises:
        ConfigError: a file is unreadable or malformed, or a value is out of range.
    """
    return load_settings(repo=repo, flags=options.layer(naming))


@dataclass(frozen=True)
class Submitter:
    """Who submits a task, and what of their own it carries beyond the configuration."""

    principal: str | None = None
    """The tasks server's caller, for quotas; None: the local user."""
    instructions: bool = True
    """Give the roles the project's instructions (AGENTS.md); False: `--no-instructions`."""
    user_instructions: str | None = None
    """The user's own AGENTS.md, read where the task is submitted."""
    mcp_servers: Sequence[McpServer] = ()
    """The user's own MCP servers (`--mcp-config`, the user file)."""


def make_task(
    text: str,
    repo: Path | str,
    *,
    settings: Settings,
    mode: Mode = "read",
    pipeline: PipelineChoice | None = None,
    interactive: bool = False,
    snapshot: SnapshotRef | None = None,
    submitter: Submitter = Submitter(),
) -> TaskSubmitted:
    """The task `text` on `repo` in `mode`, as `settings` configure it, from `submitter`. The keys
    the submitter's command line or environment set are pinned: the configuration center does not
    override them (`pinned_keys`).

    Raises:
        pydantic.ValidationError: the text is empty or too long, or the repository path is.
    """
    return TaskSubmitted(
        text=text,
        repo=str(repo),
        mode=mode,
        models=settings.models,
        budgets=settings.budgets,
        pipeline=pipeline,
        interactive=interactive,
        snapshot=snapshot,
        require_verified=settings.verification.require == "passed",
        principal=submitter.principal,
        pinned=pinned_keys(settings),
        instructions=submitter.instructions,
        user_instructions=submitter.user_instructions,
        mcp_servers=list(submitter.mcp_servers),
    )


def pinned_keys(settings: Settings) -> list[str]:
    """The dotted keys this submission's command line or environment set: the configuration
    center, applied when a worker claims the task, does not override them."""
    return sorted(k for k, o in settings.origins.items() if o.source in ("flag", "environment"))
