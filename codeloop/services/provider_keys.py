"""Model-provider and cloud credentials kept out of a process: `codeloop serve --workspaces` runs
untrusted code's tools and must hold no model key, nor pass one to a child (git, a sandbox).
"""

import os
import sys
from collections.abc import Mapping

_KEY_SUFFIXES = (
    "_API_KEY",
    "_API_TOKEN",
    "_ACCESS_KEY",
    "_SECRET_KEY",
    "_SECRET_ACCESS_KEY",
    "_SESSION_TOKEN",
)
_KEY_NAMES = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "CO_API_KEY"})


STRIPPED_ENV = "CODELOOP_STRIPPED_ENV"
"""Names (never values) of the variables `restart_without_provider_keys` removed, for the note."""


def provider_keys(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Names of model-provider and cloud credentials in `environ`, sorted."""
    return sorted(k for k in environ if k.upper().endswith(_KEY_SUFFIXES) or k.upper() in _KEY_NAMES)


def restart_without_provider_keys() -> list[str]:
    """Make sure this process's environment holds no provider key; the names removed, sorted.

    Deleting from `os.environ` is not enough: `/proc/PID/environ` (what a process that can read
    ours sees) still shows the environment the process started with. So when there is a key, the
    process executes itself again, same command line, without them (this call then returns in the
    new process, naming them from `CODELOOP_STRIPPED_ENV`).
    """
    found = provider_keys()
    if not found:
        return [n for n in os.environ.get(STRIPPED_ENV, "").split(",") if n]
    env = {k: v for k, v in os.environ.items() if k not in found}
    env[STRIPPED_ENV] = ",".join(found)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    raise AssertionError("unreachable")  # pragma: no cover
