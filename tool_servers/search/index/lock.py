"""An exclusive lock on an index, so two indexers of one repository take turns.

`filelock`'s `FileLock` (`flock` on a lock file): the kernel releases it when the holder dies, so a
crashed indexer never leaves a stale lock behind, and the library takes care of the file-system
corner cases (contention reported as EACCES, a lock file unlinked or hard-linked by someone else).
Each `FileLock` opens its own descriptor, so two `CodeIndex` objects in one process exclude each
other as two processes do. Waiting polls with single non-blocking attempts under anyio, which
keeps the wait cancellable: `FileLock`'s own blocking wait would hold a thread no cancel scope
can stop, and its asyncio variant does not run on trio.
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from filelock import FileLock, Timeout

from tool_servers.search.errors import IndexLocked

POLL_S = 0.05


@asynccontextmanager
async def hold_index_lock(path: Path, *, timeout_s: float = 900.0) -> AsyncIterator[None]:
    """Hold the lock at `path` for the body.

    Raises:
        IndexLocked: another holder kept it for `timeout_s`.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # filelock takes a lock file it cannot create for one someone else holds, and the loop below
    # would wait out the whole timeout: opening it once here makes an unusable directory (a file,
    # /proc, no permission) fail at once, as the OSError the caller reports.
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    lock = FileLock(path, mode=0o644, thread_local=False, on_acquired=_write_pid)
    with anyio.move_on_after(timeout_s) as scope:
        # Another process holds it: no event can tell us when it lets go, so poll.
        while True:
            if _try_lock(lock):
                break
            await anyio.sleep(POLL_S)
    if scope.cancelled_caught:
        raise IndexLocked(
            f"another indexer (pid {_holder(path)}) has held {path} for over {timeout_s:.0f} s; "
            "wait for it to finish or stop it"
        )
    try:
        yield
    finally:
        lock.release()


def _try_lock(lock: FileLock) -> bool:
    try:
        lock.acquire(blocking=False)
    except Timeout:
        return False
    return True


def _write_pid(fd: int) -> None:
    # Only to name the holder in another indexer's IndexLocked; the lock itself is the flock.
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _holder(path: Path) -> str:
    try:
        return path.read_bytes()[:32].decode(errors="replace").strip() or "unknown"
    except OSError:
        return "unknown"
