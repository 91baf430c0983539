"""Scratch directories under `$CODELOOP_HOME/work/`: one per task step, gone when the step ends.

A worker killed outright (SIGKILL, OOM) runs no cleanup, so each scratch directory has an owner
mark beside it, `<name>.owner` holding the owner's pid and process start time (which tells a reused
pid apart). Opening a scratch directory first deletes those whose owner is gone. A directory
without a readable mark is left alone: it may be one being set up at this moment. The mark sits
beside the directory, not in it, so it never shows up in the workspace's tree or patch.
"""

import os
import secrets
import shutil
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from bus.subjects import token

OWNER_SUFFIX = ".owner"


@asynccontextmanager
async def open_scratch(base: Path, task_id: str, label: str) -> AsyncIterator[Path]:
    """Yield a new empty directory under `base` for `task_id`'s `label` step; delete it on exit.

    Leftovers of dead owners under `base` are deleted first (see the module docstring).
    """
    await anyio.to_thread.run_sync(sweep_scratch, base)
    name = f"{token(task_id)[:64]}-{token(label)[:32]}-{secrets.token_hex(4)}"
    path = base / name
    mark = base / f"{name}{OWNER_SUFFIX}"
    await anyio.to_thread.run_sync(_claim, mark)
    try:
        path.mkdir()
        yield path
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_remove, path, mark)


def sweep_scratch(base: Path) -> list[Path]:
    """Delete the scratch directories under `base` whose owner process is gone; returns them."""
    try:
        marks = [entry for entry in base.iterdir() if entry.name.endswith(OWNER_SUFFIX)]
    except OSError:
        return []
    swept = []
    for mark in marks:
        try:
            text = mark.read_text()
        except OSError:
            continue
        pid_text, _, _ = text.partition(":")
        if not pid_text.isdigit() or _identity(int(pid_text)) == text:
            continue
        path = mark.with_name(mark.name.removesuffix(OWNER_SUFFIX))
        _remove(path, mark)
        swept.append(path)
    return swept


def _claim(mark: Path) -> None:
    mark.parent.mkdir(parents=True, exist_ok=True)
    staging = mark.with_name(f".{mark.name}.tmp")
    staging.write_text(_identity(os.getpid()) or "")
    staging.replace(mark)  # atomic: a sweeper never reads half a mark


def _identity(pid: int) -> str | None:
    """`pid:start-time` of a live process, None if there is no such process (zombies count as gone).

    /proc's start time in clock ticks since boot, not psutil's `create_time()`: wall-clock seconds
    move with clock adjustments, and a live owner's mark must keep matching it.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":
        return None
    return f"{pid}:{fields[19]}"  # field 22 of stat, counted after the command name


def _remove(path: Path, mark: Path) -> None:
    def make_writable_and_retry(function, failed_path, _exc_info) -> None:
        # Code run in the workspace may leave read-only directories; their entries still go.
        parent = os.path.dirname(failed_path)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        function(failed_path)

    if path.exists():
        shutil.rmtree(path, onerror=make_writable_and_retry)
    mark.unlink(missing_ok=True)
