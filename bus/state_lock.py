"""An exclusive lock on a state directory, held for a process's life: one owner per directory.

The same kind of lock as the search index's (`tool_servers.search.index.lock`): `filelock`'s `FileLock`,
`flock(2)` on a lock file inside the directory, except that it never waits: a second owner is
refused at once. The kernel releases it when the owner exits, SIGKILL included, so a stale lock of
a dead owner is simply taken over by the next one; there is no pid file to go stale and no race
between "is the owner alive?" and "take it". The file also holds the owner's pid, only to name it
in the refusal. The descriptor is close-on-exec (Python's default), so a child such as nats-server
never inherits the lock and cannot keep it after its owner is gone.
"""

import os
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from bus.errors import StateDirBusy

LOCK_FILE = "owner.lock"


@contextmanager
def hold_state_dir(directory: Path, *, what: str) -> Generator[Path, None, None]:
    """Hold `directory`'s lock (creating both) until the block exits; yields the lock file.

    `what` names the holder in the refusal another process gets, e.g. "codeloop serve".

    Raises:
        StateDirBusy: a live process holds the lock; the message names its pid.
        OSError: the directory or its lock file cannot be created.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    # filelock takes a lock file it cannot create for one someone else holds: opening it once
    # here reports that as the OSError it is, not as "in use".
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    lock = FileLock(path, mode=0o644, thread_local=False, on_acquired=_write_pid)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        raise StateDirBusy(
            f"{directory} is in use by {what} (pid {_holder(path)}); stop that one first, "
            "or give this one another --state-dir"
        ) from None
    try:
        yield path
    finally:
        lock.release()  # the file stays, for the next owner to lock


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _holder(path: Path) -> str:
    try:
        return path.read_bytes()[:32].decode(errors="replace").strip() or "unknown"
    except OSError:
        return "unknown"
