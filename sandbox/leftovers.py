"""Sandboxes whose owner was killed outright: found and cleaned up by the next sandbox opened.

A gVisor sandbox's container ends with its owner even on SIGKILL (the supervisor exits when its
stdin closes, and runsc with it; runsc's state and cgroups go too). Its work directory does not:
the workspace mirror is a tmpfs mount holding a copy of the workspace in RAM until reboot.
Nothing of ours runs after a SIGKILL, so each sandbox marks its work directory with its owner
(pid and process start time, which tells a reused pid apart), and opening a sandbox first
unmounts and deletes the directories of owners that are gone. A directory without a readable
mark is left alone: it may be one being set up at this moment.
"""

import os
import shutil
from pathlib import Path

import psutil

from sandbox.workspace import detach_mount

OWNER_FILE = "owner"


def claim(base: Path) -> None:
    """Create `base` and mark it as this process's (atomically: a sweeper never sees half a mark)."""
    base.mkdir(parents=True, exist_ok=True)
    staging = base / f".{OWNER_FILE}.tmp"
    staging.write_text(_identity(os.getpid()) or "")
    staging.replace(base / OWNER_FILE)


def sweep(work_dir: Path) -> list[Path]:
    """Unmount and delete the sandbox directories under `work_dir` whose owner is gone; returns them."""
    try:
        entries = [entry for entry in work_dir.iterdir() if entry.is_dir()]
    except OSError:
        return []
    swept = []
    for base in entries:
        try:
            mark = (base / OWNER_FILE).read_text()
        except OSError:
            continue
        pid_text, _, _ = mark.partition(":")
        if not pid_text.isdigit() or _identity(int(pid_text)) == mark:
            continue
        for mount_point in _mounts_under(base):
            detach_mount(mount_point)
        shutil.rmtree(base, ignore_errors=True)
        swept.append(base)
    return swept


def _identity(pid: int) -> str | None:
    """`pid:start-time` of a live process, None if there is no such process (zombies count as gone).

    The start time is /proc's, in clock ticks since boot, not psutil's `create_time()`: that one is
    wall-clock seconds, which move with every clock adjustment, and a mark that stops matching its
    live owner would have the owner's sandbox swept from under it.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":
        return None
    return f"{pid}:{fields[19]}"  # field 22 of stat, counted after the command name


def _mounts_under(base: Path) -> list[Path]:
    """Mount points at or below `base`, deepest first."""
    try:
        # psutil reads the mount table with getmntent, which undoes all of its escapes (a space,
        # tab, newline or backslash in a path), not only the space.
        points = [Path(part.mountpoint) for part in psutil.disk_partitions(all=True)]
    except OSError:
        return []
    under = [point for point in points if point == base or base in point.parents]
    return sorted(under, key=lambda p: len(p.parts), reverse=True)
