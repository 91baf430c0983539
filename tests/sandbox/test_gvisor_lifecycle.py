"""Reuse, clean-up and the workspace's Python in the gVisor sandbox."""

import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from sandbox.errors import SandboxClosed
from sandbox.limits import GvisorOptions
from tests.sandbox.conftest import OpenGvisor

pytestmark = [pytest.mark.anyio, pytest.mark.gvisor]

TEST_VENV = Path(sys.prefix)
SUITE = """
def test_passes():
    assert 1 + 1 == 2

def test_fails():
    assert "sandbox" == "host", "expected failure"
"""


async def test_a_workspace_pytest_suite_runs_and_its_exit_code_and_output_come_back(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """The suite runs in the sandbox with the runtime it needs, shown read-only."""
    (workspace / "test_suite.py").write_text(SUITE)
    async with open_gvisor(ro_paths=(TEST_VENV,)) as sandbox:
        result = await sandbox.exec([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"])
    assert result.exit_code == 1
    assert "1 failed, 1 passed" in result.stdout
    assert "expected failure" in result.stdout


async def test_a_virtualenv_inside_the_workspace_runs_on_the_interpreter_it_links_to(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """The workspace's own virtualenv and its base interpreter are visible; its bin is on PATH."""
    await anyio.run_process([sys.executable, "-m", "venv", "--without-pip", str(workspace / ".venv")])
    async with open_gvisor() as sandbox:
        result = await sandbox.exec(["python", "-c", "import sys; print(sys.prefix, sys.base_prefix)"])
    assert result.exit_code == 0, result.stderr
    prefix, base_prefix = result.stdout.split()
    assert prefix == "/workspace/.venv"
    assert base_prefix == sys.base_prefix


async def test_one_sandbox_serves_many_commands_and_syncs_the_workspace_both_ways(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """The same container (its /tmp persists) runs each command; host edits between
    commands are seen, and the command's writes and deletions reach the host."""
    (workspace / "gone.txt").write_text("delete me")
    async with open_gvisor() as sandbox:
        first = await sandbox.exec(["sh", "-c", "echo kept > /tmp/state; echo made > made.txt; rm gone.txt"])
        assert (workspace / "made.txt").read_text() == "made\n"
        assert not (workspace / "gone.txt").exists()
        (workspace / "edited.txt").write_text("from the host")
        second = await sandbox.exec(["sh", "-c", "cat /tmp/state edited.txt"])
    assert first.exit_code == 0
    assert second.stdout == "kept\nfrom the host"


async def test_a_daemonized_child_does_not_survive_its_command(open_gvisor: OpenGvisor) -> None:
    """After a command every process it started is gone, daemons included."""
    list_processes = "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    async with open_gvisor() as sandbox:
        started = await sandbox.exec(["sh", "-c", "(setsid sleep 1000 > /dev/null 2>&1 &); echo started"])
        listed = await sandbox.exec(["python3", "-c", list_processes])
    assert started.stdout == "started\n"
    # Only the supervisor (pid 1) and the lister itself remain.
    assert len(eval(listed.stdout)) == 2


async def test_cancelling_a_command_kills_and_deletes_the_container(
    runsc_processes: Callable[[], list[str]], open_gvisor: OpenGvisor
) -> None:
    """On cancellation no runsc or payload process survives; the sandbox restarts when used again."""
    async with open_gvisor() as sandbox:
        with anyio.move_on_after(1.5) as scope:
            await sandbox.exec(["sleep", "60"])
        assert scope.cancelled_caught
        assert runsc_processes() == []
        again = await sandbox.exec(["echo", "restarted"])
    assert again.stdout == "restarted\n"


async def test_closing_the_sandbox_leaves_no_runsc_process_and_refuses_new_commands(
    gvisor_options: GvisorOptions, runsc_processes: Callable[[], list[str]], open_gvisor: OpenGvisor
) -> None:
    """The container is killed and deleted on close."""
    async with open_gvisor() as sandbox:
        await sandbox.exec(["sh", "-c", "sleep 1000 &"])
        assert runsc_processes() != []
    assert runsc_processes() == []
    listed = await anyio.run_process(["runsc", "--root", str(gvisor_options.state_dir), "list", "-quiet"])
    assert listed.stdout.strip() == b""
    with pytest.raises(SandboxClosed):
        await sandbox.exec(["true"])


async def test_cancelling_while_the_sandbox_starts_leaves_no_runsc_process(
    runsc_processes: Callable[[], list[str]], open_gvisor: OpenGvisor
) -> None:
    """Cancellation at any point (here during `runsc run`) kills what was started."""
    async with open_gvisor() as sandbox:
        with anyio.move_on_after(0.05):
            await sandbox.exec(["sleep", "60"])
        assert runsc_processes() == []
