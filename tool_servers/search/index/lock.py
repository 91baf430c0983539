"""An exclusive lock on an index, so two indexers of one repository take turns.

`flock` on a lock file: the kernel releases it when the holder dies, so a crashed indexer never
leaves a stale lock behind. Locks are per open file description, so two `CodeIndex` objects in
one process exclude each other as two processes do. Waiting polls with a non-blocking attempt,
which keeps the wait cancellable (a thread blocked in `flock` could not be cancelled).
"""

import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from tool_servers.search.errors import IndexLocked

POLL_S = 0.05


@asynccontextmanager
async def hold_index_lock(path: Path, *, timeout_s: float = 900.0) -> AsyncIterator[None]:
    """Hold the lock at `path` for the body.

    Raises:
        IndexLocked: another holder kept it for `timeout_s`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with anyio.move_on_after(timeout_s) as scope:
            # Another process holds it: no event can tell us when it lets go, so poll.
            while True:
                if _try_lock(fd):
                    break
                await anyio.sleep(POLL_S)
        if scope.cancelled_caught:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise IndexLocked(
                f"another indexer (pid {holder}) has held {path} for over {timeout_s:.0f} s; "
                "wait for it to finish or stop it"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
