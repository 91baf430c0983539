"""A task on the command line: its text, repository and mode, its options (`TaskOptions` as flags),
and the one function that turns them into a checked `TaskSubmitted` (or a usage error saying what
is wrong), shared by `codeloop run` and `codeloop submit`.

The options are the top layer of the configuration (`codeloop.config.settings`): what they leave
out comes from the environment, the repository's `codeloop.toml` and the user's `config.toml`.
Budgets are range-checked there, not by the option parser, so a bad one is the same one `error:`
line whichever layer set it."""

import inspect
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from codeloop.cli.common import read_text_argument, usage_error
from codeloop.cli.option_groups import KEYWORD
from codeloop.config.errors import ConfigError
from codeloop.config.task_options import TaskOptions

if TYPE_CHECKING:  # the agents' messages import nats: loaded when a task is built, not for `--help`
    from agents.messages import McpServer, TaskSubmitted
    from agents.orchestrator.pipeline import PipelineChoice
    from codeloop.config.settings import Settings

TaskArg = Annotated[str, typer.Argument(help="What to do, in words; @FILE for a file's text, - for stdin.")]
RepoOpt = Annotated[Path, typer.Option("--repo", help="Repository the task is about.")]
McpConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--mcp-config",
        help="Your MCP servers for this task: a TOML file with [mcp_servers.NAME] tables, or Claude "
        "Code's JSON ({\"mcpServers\": {...}}); added to your user file's, replacing those of the same name.",
    ),
]
ModeOpt = Annotated[
    str, typer.Option("--mode", help="read (answer) | write (patch) | execute (patch, run tests)")
]


@dataclass(frozen=True)
class TaskFlags:
    """`TaskOptions` as a command's flags: all of them, or `only` some; `help` replaces a flag's
    help for this command, `after` places a flag after another parameter (see
    `codeloop.cli.option_groups`)."""

    only: Sequence[str] | None = None
    help: Mapping[str, str] = field(default_factory=dict)
    after: Mapping[str, str] = field(default_factory=dict)

    def parameters(self) -> list[inspect.Parameter]:
        spellings = TaskOptions.spellings()
        return [
            inspect.Parameter(
                name,
                KEYWORD,
                default=None,
                annotation=Annotated[
                    TaskOptions.model_fields[name].annotation,
                    typer.Option(spellings[name].flag, help=self.help.get(name, spellings[name].help)),
                ],
            )
            for name in (self.only or spellings)
        ]

    def build(self, values: Mapping[str, object]) -> TaskOptions:
        return TaskOptions.model_validate(values)


def build_task(
    task: str,
    repo: Path,
    *,
    mode: str,
    options: TaskOptions,
    task_id: str | None = None,
    mcp_config: Path | None = None,
) -> "TaskSubmitted":
    """The `TaskSubmitted` these options and the configuration describe (no snapshot yet), checked
    by `codeloop.config.checks.check_submission`: nothing has started when this fails.

    Raises:
        typer.Exit: (2) after saying what is wrong: an unreadable or oversized text, a missing
            repository, an unknown mode, a malformed configuration file, a model that cannot be
            resolved or called from here, a bad budget, a pipeline that is not declared or cannot
            run (unknown kind, impossible order), a repository configuration declaring MCP
            servers, a malformed `--mcp-config` file.
    """

    from bus.validation import MAX_TASK_TEXT_BYTES, submission_problems
    from codeloop.config.checks import check_submission
    from codeloop.config.task_builder import Submitter, make_task, task_settings

    text = read_text_argument(task, what="task text", max_bytes=MAX_TASK_TEXT_BYTES)
    if not repo.is_dir():
        raise usage_error(f"--repo {repo} is not a directory")
    problems = submission_problems(task_id=task_id, text=text, repo=str(repo.resolve()), mode=mode)
    if problems:
        raise usage_error("; ".join(problems))
    try:
        settings = task_settings(options, repo=repo)
        submitted = make_task(
            text,
            repo.resolve(),
            settings=settings,
            mode=mode,  # type: ignore[arg-type] - mode was validated against the Mode literals above
            interactive=sys.stdin.isatty(),
            pipeline=_pipeline_choice(options.pipeline, repo, mode=mode, settings=settings),
            submitter=Submitter(
                instructions=not options.no_instructions,
                user_instructions=None if options.no_instructions else _user_instructions(),
                mcp_servers=_mcp_servers(repo, mcp_config),
            ),
        )
        check_submission(submitted, settings=settings)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise usage_error(f"invalid task: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    if mode == "read":
        from agents.orchestrator.report import asks_for_change

        if asks_for_change(text):
            # Said before the task starts, not only in its result: read mode is the default. After
            # the checks, so a usage error stays the one line it is.
            typer.echo(
                "note: the task asks for a change, but read mode (the default) only answers; "
                "add --mode write for a patch, or --mode execute to also run the tests",
                err=True,
            )
    return submitted


def _user_instructions() -> str | None:
    """The user's own `AGENTS.md`, cut to what a task carries; None when there is none."""
    from agents.messages.task import MAX_USER_INSTRUCTIONS
    from codeloop.config.files import user_instructions_file

    try:
        text = user_instructions_file().read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text[:MAX_USER_INSTRUCTIONS] or None


def _mcp_servers(repo: Path, mcp_config: Path | None) -> "list[McpServer]":
    """The user's MCP servers for the task (user file, then `--mcp-config`).

    Raises:
        ConfigError: the repository's configuration declares servers, or a file is malformed.
    """
    from codeloop.config.mcp_servers import (
        literal_secrets,
        merged,
        read_mcp_config,
        refuse_repository_servers,
        user_mcp_servers,
    )

    refuse_repository_servers(repo)
    given = read_mcp_config(mcp_config) if mcp_config is not None else []
    servers = merged(user_mcp_servers(), given)
    for name, key in literal_secrets(servers):
        typer.echo(
            f"note: MCP server {name}: {key} looks like a secret written into the configuration; it "
            f"travels with the task to the worker and its record: keep it in the environment and "
            f"write ${{VAR}} instead",
            err=True,
        )
    return servers


def _pipeline_choice(
    name: str | None, repo: Path, *, mode: str, settings: "Settings"
) -> "PipelineChoice | None":
    """The checked `PipelineChoice` of `--pipeline` (None without one).

    Raises:
        typer.Exit: (2) an unknown name, an unknown kind or an impossible order.
    """
    if name is None:
        return None
    from agents.orchestrator.pipeline import PipelineError, choice_of
    from codeloop.config.pipelines import resolve_pipeline

    try:
        return choice_of(resolve_pipeline(name, repo.resolve(), mode=mode, settings=settings))
    except PipelineError as exc:
        raise usage_error(f"--pipeline: {exc}") from None
