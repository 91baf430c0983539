"""The gVisor workspace mirror over a hostile tree: a non-UTF-8 name, a symlink loop, a FIFO, a
socket and a mode-000 file neither fail the sandbox's start nor a command's sync."""

import os
import stat
from pathlib import Path

import pytest

from tests.hostile import BAD_NAME, GOOD, LOOP, UNREADABLE, make_hostile_repo
from tests.sandbox.conftest import OpenGvisor

pytestmark = [pytest.mark.anyio, pytest.mark.gvisor]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The hostile repository as the workspace `open_gvisor` opens."""
    return make_hostile_repo(tmp_path / "ws")


async def test_a_hostile_workspace_is_mirrored_and_synced_back(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """The command sees the files (the bad name byte for byte), its writes come back, and the
    host's special files stay what they were."""
    listing = "import os; print(sorted(os.listdir(b'.')))"
    async with open_gvisor() as sandbox:
        listed = await sandbox.exec(["python3", "-c", listing])
        wrote = await sandbox.exec(["sh", "-c", f"cat {GOOD} > copy.py && ln -s self self.py"])
    assert listed.exit_code == 0, listed.stderr
    names = eval(listed.stdout)
    assert {BAD_NAME, GOOD.encode(), LOOP.encode(), UNREADABLE.encode()} <= set(names)
    assert wrote.exit_code == 0, wrote.stderr
    assert (workspace / "copy.py").read_text() == (workspace / GOOD).read_text()
    assert os.readlink(workspace / "self.py") == "self"
    assert stat.S_ISFIFO((workspace / "fifo.py").lstat().st_mode)
    assert stat.S_ISSOCK((workspace / "sock.py").lstat().st_mode)
