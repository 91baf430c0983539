"""`codeloop config show | check`: the effective configuration, and whether it would run.

Both read what `run` and `submit` read (`codeloop.config.settings`): the environment, the repository's
`codeloop.toml` (or `[tool.codeloop]` in its pyproject.toml) and the user's `config.toml`.
"""

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import EXIT_USAGE, usage_error
from codeloop.cli.connection import Connection, run_async
from codeloop.cli.option_groups import with_option_groups
from codeloop.config.errors import ConfigError

if TYPE_CHECKING:
    from codeloop.config.settings import Settings


config_app = typer.Typer(
    no_args_is_help=True,
    help="Show the effective configuration and where each value came from, or check it.",
)

RepoOpt = Annotated[
    Path, typer.Option("--repo", help="Repository whose codeloop.toml / pyproject.toml to read.")
]


def _load(repo: Path) -> "Settings":
    from codeloop.config.settings import load_settings

    if not repo.is_dir():
        raise usage_error(f"--repo {repo} is not a directory")
    try:
        return load_settings(repo=repo)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None


def _credentials(settings: "Settings") -> dict[str, str]:
    """Each variable the configured models' providers read: `set` or `not set`, never its value."""
    from agents.models.check import CREDENTIALS

    shown: dict[str, str] = {}
    for name in settings.models.all_names():
        provider = name.partition(":")[0]
        for choice in CREDENTIALS.get(provider, ()):
            for variable in choice:
                shown[variable] = "set" if os.environ.get(variable) else "not set"
    return shown


McpConfigOpt = Annotated[
    Path | None,
    typer.Option("--mcp-config", help="A file of MCP servers, as `codeloop run --mcp-config` takes."),
]


@with_option_groups
def show(
    repo: RepoOpt = Path("."),
    mcp_config: McpConfigOpt = None,
    tools: Annotated[
        bool,
        typer.Option("--tools/--no-tools", help="Start each MCP server to list its tools (then stop it)."),
    ] = True,
    *,
    center: Annotated[
        bool,
        typer.Option(
            "--center", help="Show the configuration center's current revision instead (needs the bus)."
        ),
    ] = False,
    connection: Connection,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
) -> None:
    """Print every effective value and where it came from, and your MCP servers with their tools.

    Sources: default, user file, project file, environment, flag. Secrets are masked;
    credentials are shown only as set or not set; of an MCP server's env and headers only the
    names are shown. With --center: the center's current revision, who pushed it and every key it
    sets (a task's values come from it where its command line set none).
    """
    from codeloop.cli import config_servers

    if center:
        from codeloop.cli.center import show_center

        show_center(connection, as_json=as_json)
        return
    settings = _load(repo)
    values = settings.values()
    servers = config_servers.configured(repo, mcp_config)
    listed = (
        run_async(lambda: config_servers.listed_tools([s for s, _ in servers])) if tools and servers else {}
    )
    credentials = _credentials(settings)
    entries = config_servers.report(servers, listed)
    report = {
        "user_file": settings.user_file,
        "project_file": settings.project_file,
        "values": values,
        "credentials": credentials,
        "mcp_servers": entries,
    }
    if as_json:
        typer.echo(json.dumps(report))
        return
    typer.echo(f"user file:    {settings.user_file or '(none)'}")
    typer.echo(f"project file: {settings.project_file or '(none)'}")
    width = max((len(key) for key in values), default=0)
    for key, shown in values.items():
        where = f" {shown['where']}" if shown["where"] else ""
        typer.echo(f"{key:<{width}} = {json.dumps(shown['value'])}  ({shown['source']}{where})")
    for variable, state in credentials.items():
        typer.echo(f"{variable:<{width}}   {state}  (environment)")
    for line in config_servers.lines(entries):
        typer.echo(line)


def check(repo: RepoOpt = Path("."), mcp_config: McpConfigOpt = None) -> None:
    """Check the configuration as run, submit and eval would; exit 2 on a problem.

    Checks the files (a repository's may not declare MCP servers), every model name (provider, function file and name, credentials in this
    environment), with a cost budget that every model has a price, and that every configured
    pipeline can run (known kinds, a possible order, each role installed here; a role served
    only by workers elsewhere is reported, as it would be at submission without them).
    """
    from codeloop.cli import config_servers
    from codeloop.config.checks import submission_problems
    from codeloop.config.task_builder import make_task

    settings = _load(repo)
    config_servers.configured(repo, mcp_config)
    probe = make_task("config check", repo.resolve(), settings=settings)
    problems = submission_problems(probe, settings=settings) + pipeline_problems(settings)
    if problems:
        from redaction import redact_text

        for problem in problems:
            typer.echo(f"error: {redact_text(problem)}", err=True)
        raise typer.Exit(EXIT_USAGE)
    files = [f for f in (settings.user_file, settings.project_file) if f]
    names = settings.models.all_names()
    typer.echo(
        f"ok: {len(files)} file(s) ({', '.join(files) or 'none'}), "
        f"{len(names)} model(s) ({', '.join(names) or 'none: diagnose mode'}), "
        f"{len(settings.pipelines)} pipeline(s)"
    )


def register(app: typer.Typer) -> None:
    """Add `codeloop config ...` to the root app."""
    from codeloop.cli import center

    config_app.command()(show)
    config_app.command()(check)
    center.register(config_app)
    app.add_typer(config_app, name="config")


def pipeline_problems(settings: "Settings") -> list[str]:
    """Each configured pipeline that a write-mode submission naming it would be refused for."""
    from agents.orchestrator.pipeline import PipelineError, parse_pipeline
    from agents.runtime.plugins import load_roles
    from codeloop.config.pipelines import role_problems

    registry = load_roles()
    problems = []
    for name, stages in settings.pipelines.items():
        try:
            pipeline = parse_pipeline(name, stages)
        except PipelineError as exc:
            problems.append(f"pipelines.{name}: {exc}")
            continue
        problems += [f"pipelines.{name}: {problem}" for problem in role_problems(pipeline, registry)]
    return problems
