"""Which sandbox backend the agents' code runs in (`[sandbox] backend`), and who may choose it.

The trust rule (docs/configuration.md): the person running codeloop chooses — `CODELOOP_SANDBOX`,
else `[sandbox] backend` in their user file, else `auto`. A repository's own configuration
(`codeloop.toml`, `[tool.codeloop]`) is content of the code under test: it may ask for a stronger
sandbox for the code it brings, never a weaker one. Strongest first: `gvisor` (only gVisor; fails
where runsc does not work), `auto` (gVisor where runsc works, else the process backend, said in
every result), `process` (plain subprocesses with rlimits).
"""

import os
from pathlib import Path

from codeloop.config.errors import ConfigError
from codeloop.config.files import user_file, user_file_table

STRENGTH = {"process": 0, "auto": 1, "gvisor": 2}
"""How strongly each backend isolates the code it runs."""
ENV = "CODELOOP_SANDBOX"


def machine_backend() -> str:
    """The backend the person running codeloop chose: `CODELOOP_SANDBOX`, else the user file's
    `[sandbox] backend` (a user file that does not read counts as none), else `auto`. Checked
    where a sandbox is opened (`sandbox.backend.parse_policy`), so a bad value is said there."""
    configured = user_file_table("sandbox").get("backend")  # a str: `SandboxFile` checked it
    return os.environ.get(ENV) or (configured if isinstance(configured, str) else None) or "auto"


def stronger(first: str, second: str) -> str:
    """The stronger of two backends (an unknown name counts as the weakest: it fails where parsed)."""
    return first if STRENGTH.get(first, -1) >= STRENGTH.get(second, -1) else second


def check_project_backend(project_file: Path, chosen: str, baseline: str, baseline_from: str) -> None:
    """Refuse a repository's `[sandbox] backend` that is weaker than the one it would replace.

    Raises:
        ConfigError: `chosen` (from `project_file`) isolates less than `baseline` (`baseline_from`:
            the user file or the default), saying who may choose a weaker one.
    """
    if STRENGTH.get(chosen, -1) >= STRENGTH.get(baseline, -1):
        return
    raise ConfigError(
        f"{project_file}: sandbox.backend = {chosen!r} would weaken the sandbox ({baseline!r}, "
        f"{baseline_from}) for the code this repository brings: a repository's configuration may ask "
        f"for a stronger backend, never a weaker one. Remove the key from the repository's file; to run "
        f"its code under {chosen!r} anyway, choose it yourself: `[sandbox] backend = {chosen!r}` in "
        f"{user_file()} or {ENV}={chosen}."
    )
