"""`codeloop env build|show|clean`: a repository's project environment (`sandbox.environments`).

    codeloop env show  [--repo DIR] [--json]    the recipe detected, from which files, its key,
                                                whether it is built (size, when, last used)
    codeloop env build [--repo DIR] [--json]    build it now (progress on stderr); nothing to do
                                                when the cache has it
    codeloop env clean [--repo DIR | --all] [--json]   remove it (or every environment not in use)

Exit codes: 0 done; 1 the environment could not be made (env.setup: the message names the step
and the log's tail, or the missing Python and how to install it); 2 usage errors.
"""

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import JsonValue

from codeloop.cli.common import fail, usage_error
from codeloop.config.errors import ConfigError

if TYPE_CHECKING:
    from sandbox.environments import Environment, EnvironmentInfo, EnvironmentSettings

env_app = typer.Typer(
    no_args_is_help=True,
    help="A repository's project environment: the recipe detected, built once into a cached virtualenv.",
)
RepoOption = Annotated[Path, typer.Option("--repo", help="The repository (default: the current directory).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]


def environment_settings(repo: Path | None = None) -> "EnvironmentSettings":
    """The environment settings for work on `repo` (`codeloop.config.project_environment`: the
    cache in codeloop's cache directory, builds with the package index's variables, `[environment]`
    of the repository's and the user's configuration files); a configuration file that does not
    read is a usage error (exit 2) naming the file and the key."""
    from codeloop.config.project_environment import environment_settings as configured

    try:
        return configured(repo)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None


def _repo(repo: Path) -> Path:
    if not repo.is_dir():
        raise usage_error(f"--repo {repo} is not an existing directory")
    return repo.resolve()


def _when(epoch: float) -> str | None:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds") if epoch else None


def _describe(repo: Path) -> dict[str, JsonValue]:
    """What `show` prints: the recipe, its key and, when built, the environment."""
    from sandbox.environments import EnvironmentStore, resolve_recipe
    from sandbox.environments.opening import project_venv

    settings = environment_settings(repo)
    recipe = resolve_recipe(repo, settings)
    shown: dict[str, JsonValue] = {
        "repo": str(repo),
        "recipe": None,
        "key": None,
        "built": False,
        "environment": None,
    }
    if recipe is None:
        return shown
    shown["recipe"] = recipe.model_dump(mode="json")
    if recipe.kind == "venv":
        environment = project_venv(repo, recipe)
        return shown | {
            "key": environment.key,
            "built": True,
            "environment": environment.model_dump(mode="json"),
        }
    store = EnvironmentStore(settings)
    key = store.key(recipe, repo)
    environment = store.load(key)
    shown |= {"key": key, "built": environment is not None, "cache_dir": str(settings.cache_dir)}
    if environment is not None:
        shown["environment"] = environment.model_dump(mode="json")
        shown["last_used"] = _when(store.last_used(key))
        shown["in_use"] = store.in_use(key)
    return shown


def _print_text(shown: dict[str, JsonValue]) -> None:
    recipe = shown["recipe"]
    if not isinstance(recipe, dict):  # None: no recipe
        typer.echo(
            f"{shown['repo']}: no environment (nothing to install): commands use codeloop's own interpreter"
        )
        return
    typer.echo(f"recipe:  {recipe['kind']} — {recipe['source']}")
    typer.echo(f"python:  {recipe['python'] or 'any (the running interpreter preferred)'}")
    for command in _texts(recipe["install"]):
        typer.echo(f"install: {command}")
    if recipe["inputs"]:
        typer.echo(f"inputs:  {', '.join(_texts(recipe['inputs']))}")
    if recipe.get("index_date"):
        typer.echo(f"index:   as of {recipe['index_date']}")
    typer.echo(f"key:     {shown['key']}")
    environment = shown["environment"]
    if not isinstance(environment, dict):  # None: not built
        typer.echo("built:   no (`codeloop env build` builds it; the first test run would too)")
        return
    size = environment["size_bytes"]
    size_mb = (size if isinstance(size, int | float) else 0) / 1024 / 1024
    typer.echo(f"built:   {environment['built_at']} in {environment['build_s']:.1f} s, {size_mb:.0f} MB")
    typer.echo(f"path:    {environment['path']} (Python {environment['python_version']})")
    if shown.get("last_used"):
        typer.echo(f"used:    {shown['last_used']}{' (in use now)' if shown.get('in_use') else ''}")


def _texts(value: JsonValue) -> list[str]:
    """A list of the recipe's JSON (its install commands, its inputs) as text."""
    return [str(item) for item in value] if isinstance(value, list) else []


def _setup_errors() -> tuple[type[Exception], ...]:
    from sandbox.errors import EnvironmentSetupError

    return (EnvironmentSetupError,)


@env_app.command("show")
def show_command(repo: RepoOption = Path("."), json_output: JsonOption = False) -> None:
    """Show the recipe detected for the repository, from which files, its key, and whether it is built."""

    root = _repo(repo)
    try:
        shown = _describe(root)
    except _setup_errors() as exc:
        raise fail(f"env.setup: {exc}") from None
    if json_output:
        typer.echo(json.dumps(shown))
    else:
        _print_text(shown)


@env_app.command("build")
def build_command(repo: RepoOption = Path("."), json_output: JsonOption = False) -> None:
    """Build the repository's environment now (progress on stderr); nothing to do when it is cached."""

    import anyio

    from sandbox.environments import open_environment

    root = _repo(repo)
    settings = environment_settings(root)

    def progress(line: str) -> None:
        sys.stderr.write(f"  {line}\n")
        sys.stderr.flush()

    async def build() -> "tuple[EnvironmentInfo, Environment] | None":
        async with open_environment(root, settings, progress=progress) as lease:
            return None if lease is None else (lease.info, lease.environment)

    try:
        built = anyio.run(build)
    except _setup_errors() as exc:
        raise fail(f"env.setup: {exc}") from None
    except KeyboardInterrupt:
        raise fail("interrupted; the unfinished build is discarded by the next one", 130) from None
    if json_output:
        info, environment = built or (None, None)
        shown: dict[str, JsonValue] = {
            "repo": str(root),
            "info": info.model_dump(mode="json") if info is not None else None,
            "environment": environment.model_dump(mode="json") if environment is not None else None,
        }
        typer.echo(json.dumps(shown))
    elif built is None:
        typer.echo(f"{root}: no environment (nothing to install): commands use codeloop's own interpreter")
    else:
        info, environment = built
        how = f"built in {info.build_s:.1f} s" if info.built else "already built"
        typer.echo(f"{info.key}: {info.kind} — {info.source}; Python {info.python_version}; {how}")
        typer.echo(f"path: {environment.path}")


@env_app.command("clean")
def clean_command(
    repo: RepoOption = Path("."),
    every: Annotated[bool, typer.Option("--all", help="Every environment in the cache not in use.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Remove the repository's environment (or, with --all, every one not in use); one in use stays."""

    from sandbox.environments import EnvironmentStore, resolve_recipe

    settings = environment_settings(None if every else _repo(repo))
    store = EnvironmentStore(settings)
    removed: list[str] = []
    kept: list[str] = []
    try:
        if every:
            keys = [env.key for env in store.environments()]
        else:
            recipe = resolve_recipe(_repo(repo), settings)
            keys = [] if recipe is None or recipe.kind == "venv" else [store.key(recipe, _repo(repo))]
    except _setup_errors() as exc:
        raise fail(f"env.setup: {exc}") from None
    for key in keys:
        if store.load(key) is not None:
            (removed if store.remove(key) else kept).append(key)
    if every:
        removed += store.remove_unfinished()
    if json_output:
        typer.echo(json.dumps({"removed": removed, "in_use": kept}))
        return
    for key in removed:
        typer.echo(f"removed {key}")
    for key in kept:
        typer.echo(f"kept {key}: in use (or being built)")
    if not keys:
        typer.echo("nothing to remove")


def register(app: typer.Typer) -> None:
    """Add `codeloop env ...` to the root app."""
    app.add_typer(env_app, name="env")
