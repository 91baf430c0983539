"""`codeloop config show | check`: the effective configuration, and whether it would run.

Both read what `run` and `submit` read (`codeloop.config.settings`): the environment, the repository's
`codeloop.toml` (or `[tool.codeloop]` in its pyproject.toml) and the user's `config.toml`.
"""

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from codeloop.cli.common import EXIT_USAGE, usage_error

config_app = typer.Typer(
    no_args_is_help=True,
    help="Show the effective configuration and where each value came from, or check it.",
)

RepoOpt = Annotated[
    Path, typer.Option("--repo", help="Repository whose codeloop.toml / pyproject.toml to read.")
]


def _load(repo: Path) -> Any:
    from codeloop.config.errors import ConfigError
    from codeloop.config.settings import load_settings

    if not repo.is_dir():
        raise usage_error(f"--repo {repo} is not a directory")
    try:
        return load_settings(repo=repo)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None


def _credentials(settings: Any) -> dict[str, str]:
    """Each variable the configured models' providers read: `set` or `not set`, never its value."""
    from agents.models.check import CREDENTIALS

    shown: dict[str, str] = {}
    for name in settings.models.all_names():
        provider = name.partition(":")[0]
        for choice in CREDENTIALS.get(provider, ()):
            for variable in choice:
                shown[variable] = "set" if os.environ.get(variable) else "not set"
    return shown


@config_app.command()
def show(
    repo: RepoOpt = Path("."),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
) -> None:
    """Print every effective value and where it came from.

    Sources: default, user file, project file, environment, flag. Secrets are masked;
    credentials are shown only as set or not set.
    """
    settings = _load(repo)
    values = settings.values()
    report = {
        "user_file": settings.user_file,
        "project_file": settings.project_file,
        "values": values,
        "credentials": _credentials(settings),
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
    for variable, state in report["credentials"].items():
        typer.echo(f"{variable:<{width}}   {state}  (environment)")


@config_app.command()
def check(repo: RepoOpt = Path(".")) -> None:
    """Check the configuration as run, submit and eval would; exit 2 on a problem.

    Checks the files, every model name (provider, function file and name, credentials in this
    environment), with a cost budget that every model has a price, and that every configured
    pipeline can run (known kinds, a possible order, each role installed here; a role served
    only by workers elsewhere is reported, as it would be at submission without them).
    """
    from codeloop.config.checks import submission_problems
    from codeloop.config.task_builder import make_task

    settings = _load(repo)
    probe = make_task("config check", repo.resolve(), settings=settings)
    problems = submission_problems(probe, settings=settings) + _pipeline_problems(settings)
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
    app.add_typer(config_app, name="config")


def _pipeline_problems(settings: Any) -> list[str]:
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
