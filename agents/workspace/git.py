"""Running git: against the user's checkout (their config, read-mostly) or a scratch workspace (none).

Two environments, on purpose. Reading the user's checkout must see what *they* see — their
`core.excludesFile` decides what is ignored — so it keeps their config but turns off what could
run a program (`core.fsmonitor`) or take locks. A scratch workspace gets no config but its own:
no global or system file, no hooks, a fixed author and date, so a snapshot's commit is the same
commit on every worker and nothing of the worker's user leaks into it.
"""

import os
import subprocess
from pathlib import Path

import anyio

from agents.workspace.errors import GitFailed

GIT_TIMEOUT_S = 120.0
AUTHOR_NAME = "codeloop"
AUTHOR_EMAIL = "codeloop@localhost"
FIXED_EPOCH = 946684800
FIXED_DATE = f"@{FIXED_EPOCH} +0000"
"""Every snapshot commit has this date, so a snapshot gives the same commit id on every worker."""

_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.quotepath=off")

_SCRATCH_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_SYSTEM": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": AUTHOR_NAME,
    "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
    "GIT_AUTHOR_DATE": FIXED_DATE,
    "GIT_COMMITTER_NAME": AUTHOR_NAME,
    "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
    "GIT_COMMITTER_DATE": FIXED_DATE,
}

SCRATCH_CONFIG = {
    "core.hooksPath": "/dev/null",
    "core.autocrlf": "false",
    "core.fileMode": "true",
    "core.symlinks": "true",
    "commit.gpgSign": "false",
    "gc.auto": "0",
    "user.name": AUTHOR_NAME,
    "user.email": AUTHOR_EMAIL,
}
"""Written into a scratch repository's own config, so git run there by others (the git tool
server, the verifier) behaves the same without our environment."""


def _base_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "LC_ALL": "C"})
    return env


def scratch_env(**extra: str) -> dict[str, str]:
    return {**_base_env(), **_SCRATCH_ENV, **extra}


async def run_git(
    cwd: Path,
    *args: str,
    scratch: bool,
    input: bytes | None = None,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> tuple[int, bytes, str]:
    """Run `git -C cwd ARGS`; returns (exit code, stdout bytes, stderr text).

    Raises:
        GitFailed: git is missing, exited non-zero (with `check`), or took over `GIT_TIMEOUT_S`.
    """
    cmd = ["git", "-C", str(cwd), *_SAFE, *args]
    if scratch:
        cmd[3:3] = ["-c", "core.hooksPath=/dev/null"]
    full_env = {**(scratch_env() if scratch else _base_env()), **(env or {})}
    try:
        with anyio.fail_after(GIT_TIMEOUT_S):
            # The given input, or none: never the stdin of the person who ran codeloop.
            no_stdin = subprocess.DEVNULL if input is None else None
            done = await anyio.run_process(cmd, input=input, stdin=no_stdin, env=full_env, check=False)
    except TimeoutError:
        raise GitFailed(f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s in {cwd}") from None
    except OSError as exc:
        raise GitFailed(f"cannot run git ({exc}); install git and make sure it is on PATH") from exc
    err = done.stderr.decode("utf-8", errors="replace").strip()
    if check and done.returncode != 0:
        raise GitFailed(f"git {args[0]} failed in {cwd}: {err or 'exit ' + str(done.returncode)}", stderr=err)
    return done.returncode, done.stdout, err
