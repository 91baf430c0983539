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
    """`pid:start-time` of a live process, None if there is no such process (zombies count as gone)."""
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
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    prefix = str(base)
    points = []
    for line in lines:
        fields = line.split()
        if len(fields) > 1:
            point = fields[1].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                points.append(Path(point))
    return sorted(points, key=lambda p: len(p.parts), reverse=True)
