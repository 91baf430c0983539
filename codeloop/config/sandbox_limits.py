"""`workspace_sandbox_limits()`: the `[sandbox]` limits of the configuration files for a root the
composition root serves tools on, as the exec server's `SandboxLimits`; `workspace_sandbox_policy()`:
its backend, which the root's own file may only make stronger (`codeloop.config.sandbox_backend`).

The same files as a root's `[environment]` (`codeloop.config.project_environment`): the
repository's `codeloop.toml` (or `[tool.codeloop]`) over the user file. A project whose suite
needs more than the defaults (a large suite under coverage: minutes of CPU time, gigabytes of
memory) says so in its own file, and every worker that verifies its tasks gives it that much.
"""

import logging
from pathlib import Path

from codeloop.config.errors import ConfigError
from codeloop.config.files import project_file, read_config_file, user_file_table
from codeloop.config.sandbox_backend import stronger
from codeloop.config.settings import Settings, load_settings
from sandbox.limits import SandboxLimits

log = logging.getLogger("codeloop")


def sandbox_limits(settings: Settings) -> SandboxLimits:
    """The limits of `settings.sandbox` (its `backend` is the sandbox policy's, not a limit)."""
    return SandboxLimits(**settings.sandbox.model_dump(exclude={"backend"}))


def workspace_sandbox_limits(root: Path) -> SandboxLimits:
    """`[sandbox]` for `root`: a configuration file that no longer reads (the agents may have
    edited a workspace's) is said in the log and the user file's limits serve instead, so a broken
    `codeloop.toml` never stops the tools from being built."""
    try:
        return sandbox_limits(load_settings(repo=root, cwd=root))
    except ConfigError as exc:
        log.warning("the configuration of %s is not usable for its sandbox limits: %s", root, exc)
    given = user_file_table("sandbox")
    given.pop("backend", None)
    return SandboxLimits.model_validate(given)


def workspace_sandbox_policy(root: Path, machine: str) -> str:
    """The sandbox backend for code under `root`: the machine's (`machine_backend`), or the
    stronger one `root`'s own configuration asks for. A weaker one changes nothing here (the
    submission refused it already, or the agents edited the workspace's file); a file that does
    not read is said in the log and changes nothing either."""
    found = project_file(root.resolve())
    if found is None:
        return machine
    try:
        asked = read_config_file(*found).config.sandbox.backend
    except ConfigError as exc:
        log.warning("the configuration of %s is not usable for its sandbox backend: %s", root, exc)
        return machine
    return stronger(machine, asked) if asked else machine
