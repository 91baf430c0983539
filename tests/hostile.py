"""A repository no tool may trip over: what real trees hold and naive walkers crash or hang on."""

import os
import stat
import subprocess
from pathlib import Path

GOOD = "good.py"
BAD_NAME = b"bad\xff.py"
"""A file name that is not UTF-8 (Latin-1 `ÿ`), as old archives and other systems leave them."""
BAD_DIR = b"dir\xfe"
SPECIAL = {"fifo.py": "a FIFO", "sock.py": "a socket"}
UNREADABLE = "secret.py"
LOOP = "loop.py"
"""A symlink to itself: resolving it fails with ELOOP."""


def make_hostile_repo(root: Path) -> Path:
    """A git repository (one commit of `good.py`) that also holds a non-UTF-8 file name and
    directory, a symlink loop, a directory symlink cycle, a FIFO, a socket and a mode-000 file."""
    root.mkdir(parents=True)
    (root / GOOD).write_text("def find_the_good_function():\n    return 'good'\n")
    for args in (["init", "-q", "-b", "main"], ["add", GOOD]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qm", "init"],
        check=True,
    )
    base = os.fsencode(root)
    with open(os.path.join(base, BAD_NAME), "wb") as file:
        file.write(b"def bad_name_function():\n    return 1\n")
    os.mkdir(os.path.join(base, BAD_DIR))
    with open(os.path.join(base, BAD_DIR, b"inside.py"), "wb") as file:
        file.write(b"x = 1\n")
    os.symlink(LOOP, root / LOOP)
    (root / "cycle").mkdir()
    os.symlink("..", root / "cycle" / "up")
    os.mkfifo(root / "fifo.py")
    os.mknod(root / "sock.py", stat.S_IFSOCK | 0o644)
    (root / UNREADABLE).write_text("password = 'hunter2'\n")
    os.chmod(root / UNREADABLE, 0)
    return root
