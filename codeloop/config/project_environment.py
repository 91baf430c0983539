"""`environment_settings()`: the one place a process's `EnvironmentSettings` are made.

    cache     `environments/` in codeloop's cache directory (CODELOOP_CACHE_DIR, else the platform's)
    builds    the package index's, proxy and TLS variables of this process's environment
              (`sandbox.environments.build_variables`), nothing else
    override  `[environment]` of the configuration files: the repository's `codeloop.toml` (or
              `[tool.codeloop]`) over the user file (`codeloop.config.settings`)

Every user calls it: the composition root for each root it builds tool servers on (the exec and
search servers of a scratch workspace, the hosted servers, `codeloop mcp` — servers in processes
of their own get the result as configuration, never reading codeloop's files), `codeloop env`,
`codeloop sandbox exec`, `codeloop search`'s example runs, eval and the workspace service.

A scratch workspace is a copy of the repository, its `codeloop.toml` included, so the
environment of a task's workspace is configured by the repository the task came from, on whatever
worker builds the servers; the worker's own user file supplies what the repository leaves unset.
"""

import logging
import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

from codeloop.config.environment import tool_server_config
from codeloop.config.errors import ConfigError
from codeloop.config.files import user_file_table
from codeloop.config.settings import EnvironmentSection, Settings, load_settings
from sandbox.environments.settings import CONFIGURED_SOURCE, EnvironmentSettings, build_variables

log = logging.getLogger("codeloop")
ENVIRONMENTS_DIR = "environments"


def environment_cache_dir(cache_root: Path | None = None) -> Path:
    """Where this machine's environments live: `environments/` in codeloop's cache directory
    (`cache_root`, else CODELOOP_CACHE_DIR, else the platform's user cache directory)."""
    cache = (
        cache_root
        or tool_server_config().cache_dir
        or platformdirs.user_cache_path("codeloop", appauthor=False)
    )
    return cache / ENVIRONMENTS_DIR


def from_section(
    section: EnvironmentSection,
    *,
    source: str | None = None,
    environ: Mapping[str, str] | None = None,
    cache_root: Path | None = None,
) -> EnvironmentSettings:
    """`section` (the effective `[environment]`) as the sandbox's settings, with this machine's
    cache directory (`environment_cache_dir(cache_root)`) and build variables (of `environ`,
    default this process's); `source` names the file that set python or install."""
    index_date = None if section.index_date == "latest" else section.index_date
    return EnvironmentSettings(
        cache_dir=environment_cache_dir(cache_root),
        enabled=section.enabled,
        python=section.python,
        install=tuple(section.install) if section.install is not None else None,
        configured_source=f"[environment] in {source}" if source else CONFIGURED_SOURCE,
        index_date=index_date,
        python_paths=tuple(Path(p) for p in section.python_paths),
        max_size_mb=section.max_size_mb,
        build_timeout_s=section.build_timeout_s,
        build_env=build_variables(os.environ if environ is None else environ),
    )


def _source_of(settings: Settings) -> str | None:
    """The file that set `python` or `install`, for the recipe's description."""
    for key in ("environment.install", "environment.python"):
        origin = settings.origins.get(key)
        if origin is not None and origin.where and origin.source.endswith("file"):
            return Path(origin.where).name
    return None


def environment_settings(
    repo: Path | None = None,
    *,
    settings: Settings | None = None,
    enabled: bool | None = None,
    cache_root: Path | None = None,
) -> EnvironmentSettings:
    """The `EnvironmentSettings` for work on `repo`: `settings.environment` when given (a command
    that already loaded its settings), else the configuration files read for `repo` (default: the
    current directory). `enabled` (a command line's choice) overrides the files; `cache_root` is
    codeloop's cache directory when the caller has it (see `environment_cache_dir`).

    Raises:
        ConfigError: a configuration file is unreadable or malformed (the message names it).
    """
    loaded = settings if settings is not None else load_settings(repo=repo, cwd=repo)
    section = loaded.environment
    if enabled is not None:
        section = section.model_copy(update={"enabled": enabled})
    return from_section(section, source=_source_of(loaded), cache_root=cache_root)


def workspace_environment_settings(root: Path, *, cache_root: Path | None = None) -> EnvironmentSettings:
    """`environment_settings(root)` for a root the composition root serves tools on (a scratch
    workspace, whose files the agents may have edited): a configuration file that no longer reads
    is said in the log, and the machine's settings (the user file's) serve instead, so a broken
    `codeloop.toml` in a workspace never stops its tools from being built."""
    try:
        return environment_settings(root, cache_root=cache_root)
    except ConfigError as exc:
        log.warning("the configuration of %s is not usable for its environment: %s", root, exc)
    return from_section(
        EnvironmentSection.model_validate(user_file_table("environment")), cache_root=cache_root
    )


def dependency_dates(repo: Path) -> dict[str, str]:
    """When the checkout at `repo` last changed each file its project environment's recipe reads
    (`sandbox.environments.detect.input_dates`): what its snapshot carries, so a scratch workspace
    made from it resolves requirements as of the same date, and gets the same environment key, as
    the checkout. Empty when there is no recipe, no git, or the configuration does not read (the
    submission's own checks say so)."""
    from sandbox.environments.detect import input_dates, resolve_recipe
    from sandbox.errors import EnvironmentSetupError

    try:
        settings = environment_settings(repo)
        recipe = resolve_recipe(repo, settings)
    except (ConfigError, EnvironmentSetupError) as exc:
        log.debug("no dependency dates for %s: %s", repo, exc)
        return {}
    if recipe is None or recipe.kind == "venv" or settings.index_date != "git":
        return {}
    return input_dates(repo.resolve(), recipe.inputs)
