"""Finding processes a test left behind: every test that starts servers, workers or sandboxes
checks afterwards that none of them is still alive)."""

import os
from pathlib import Path


def processes_mentioning(marker: str | Path) -> list[str]:
    """`pid: command line` of live processes (not this one) whose command line contains `marker`.

    Tests give each server, worker and sandbox a path under the test's tmp dir, so the marker
    tells our processes from anyone else's. Zombies are skipped: they are dead, and PID 1 here
    does not always reap orphans.
    """
    found = []
    needle = str(marker)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline.strip()[:300]}")
    return found
