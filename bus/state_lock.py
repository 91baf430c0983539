"""An exclusive lock on a state directory, held for a process's life: one owner per directory.

`flock(2)` on a lock file inside the directory. The kernel releases it when the owner exits, SIGKILL
included, so a stale lock of a dead owner is simply taken over by the next one; there is no pid
file to go stale and no race between "is the owner alive?" and "take it". The file also holds the
owner's pid, only to name it in the refusal. The descriptor is close-on-exec (Python's default),
so a child such as nats-server never inherits the lock and cannot keep it after its owner is gone.
"""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bus.errors import StateDirBusy

LOCK_FILE = "owner.lock"


@contextmanager
def hold_state_dir(directory: Path, *, what: str) -> Iterator[Path]:
    """Hold `directory`'s lock (creating both) until the block exits; yields the lock file.

    `what` names the holder in the refusal another process gets, e.g. "codeloop serve".

    Raises:
        StateDirBusy: a live process holds the lock; the message names its pid.
        OSError: the directory or its lock file cannot be created.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise StateDirBusy(
                f"{directory} is in use by {what} (pid {holder}); stop that one first, "
                "or give this one another --state-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock; the file stays, for the next owner to lock
