"""Finding processes a test left behind: every test that starts servers, workers or sandboxes
checks afterwards that none of them is still alive)."""

import json
import os
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process


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


async def stop_process(process: Process, sig: int = signal.SIGTERM, *, grace_s: float = 15.0) -> None:
    """Ask `process` to stop with `sig`, kill it if it has not within `grace_s`, and reap it;
    shielded, so a test's cancellation still leaves nothing running."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.send_signal(sig)  # pyright: ignore[reportArgumentType] - signal numbers are what send_signal passes on to os.kill
            with anyio.move_on_after(grace_s):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


READY_S = 240.0
"""How long a process may take to say it is ready: a wait for an event, not a bound on speed (a
`codeloop serve` took 46 s to start on a two-core machine at a load average of 8; its imports
and the nats-server's start are CPU-bound)."""


@asynccontextmanager
async def ready_process(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    ready_s: float = READY_S,
    stop_signal: int = signal.SIGTERM,
) -> AsyncIterator[tuple[Process, dict[str, Any]]]:
    """Start `command`, wait up to `ready_s` for its first stdout line (a JSON object: a serve's
    note, a worker's ready line) and yield the process with it; stopped and reaped on the way out."""
    process = await anyio.open_process(list(command), env=env, cwd=cwd)
    try:
        assert process.stdout is not None
        buffer = b""
        with anyio.fail_after(ready_s):
            while b"\n" not in buffer:
                buffer += await process.stdout.receive()
        yield process, json.loads(buffer.split(b"\n", 1)[0])
    finally:
        with anyio.CancelScope(shield=True):
            await stop_process(process, stop_signal)
            await process.aclose()
