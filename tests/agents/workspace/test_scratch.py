"""Scratch directories: removed when their step ends, swept when their owner died without cleaning up."""

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from agents.workspace import open_scratch, sweep_scratch

pytestmark = pytest.mark.anyio


async def test_a_scratch_directory_is_new_empty_and_gone_after_its_step(tmp_path: Path) -> None:
    """Workspaces never outlive their step, read-only directories left by test runs included."""
    base = tmp_path / "work"
    async with (
        open_scratch(base, "task-1", "coder") as first,
        open_scratch(base, "task-1", "coder") as second,
    ):
        assert first != second and first.parent == base
        assert list(first.iterdir()) == []
        (first / "ro").mkdir()
        (first / "ro" / "f").write_text("x")
        (first / "ro").chmod(0o500)
    assert list(base.iterdir()) == []


async def test_a_scratch_directory_is_removed_when_its_step_fails(tmp_path: Path) -> None:
    """Cleanup runs on errors and cancellation too."""
    base = tmp_path / "work"
    with pytest.raises(RuntimeError):
        async with open_scratch(base, "task-1", "verifier") as path:
            (path / "f").write_text("x")
            raise RuntimeError("step failed")
    with anyio.move_on_after(0.01):
        async with open_scratch(base, "task-2", "coder"):
            await anyio.sleep_forever()
    assert list(base.iterdir()) == []


def dead_owner_mark() -> str:
    """The mark of a process that has exited: a real pid, no longer alive."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    return f"{child.stdout.strip()}:12345"


async def test_opening_a_scratch_directory_sweeps_leftovers_of_dead_owners_only(tmp_path: Path) -> None:
    """A worker killed by SIGKILL runs no cleanup; the next one removes what it left, and nothing of
    a live owner or without a mark (it may be being set up right now)."""
    base = tmp_path / "work"
    (base / "dead-task-coder-1").mkdir(parents=True)
    (base / "dead-task-coder-1" / "file").write_text("left behind")
    (base / "dead-task-coder-1.owner").write_text(dead_owner_mark())
    (base / "unmarked").mkdir()
    async with open_scratch(base, "live", "coder") as live:
        async with open_scratch(base, "other", "coder") as other:
            assert not (base / "dead-task-coder-1").exists()
            assert not (base / "dead-task-coder-1.owner").exists()
            assert live.exists() and other.exists() and (base / "unmarked").exists()
            assert sweep_scratch(base) == []
    assert sorted(p.name for p in base.iterdir()) == ["unmarked"]
