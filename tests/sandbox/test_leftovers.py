"""A sandbox whose owner was SIGKILLed: its workspace mirror (a tmpfs holding a copy of the
workspace in RAM) is unmounted and deleted by the next sandbox opened; a live one is never touched."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from sandbox.leftovers import OWNER_FILE, claim, sweep
from sandbox.limits import GvisorOptions
from tests.sandbox.conftest import OpenGvisor

REPO_ROOT = Path(__file__).resolve().parents[2]

_OWNER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import anyio
    from sandbox.backend import open_sandbox
    from sandbox.limits import GvisorOptions, SandboxLimits

    async def main():
        options = GvisorOptions(state_dir=Path(sys.argv[2]), work_dir=Path(sys.argv[3]))
        async with open_sandbox(Path(sys.argv[1]), limits=SandboxLimits(), backend="gvisor", gvisor=options) as box:
            await box.exec(["true"])
            print("ready", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)


def _mounts_under(directory: Path) -> list[str]:
    return [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if str(directory) in line
    ]


def _start_owner(workspace: Path, options: GvisorOptions) -> subprocess.Popen[str]:
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(workspace), str(options.state_dir), str(options.work_dir)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
    return owner


def _sigkill(owner: subprocess.Popen[str]) -> None:
    owner.send_signal(signal.SIGKILL)
    owner.wait()


def _bases(options: GvisorOptions) -> set[Path]:
    return {p for p in options.work_dir.iterdir() if p.is_dir()}


@pytest.mark.anyio
@pytest.mark.slow
async def test_next_sandbox_cleans_up_after_a_killed_owner_and_spares_a_live_one(
    open_gvisor: OpenGvisor, gvisor_options: GvisorOptions, workspace: Path, runsc_processes
) -> None:
    (workspace / "data.txt").write_text("x" * 100_000)
    killed = await anyio.to_thread.run_sync(_start_owner, workspace, gvisor_options)
    (killed_base,) = _bases(gvisor_options)
    live = await anyio.to_thread.run_sync(_start_owner, workspace, gvisor_options)
    (live_base,) = _bases(gvisor_options) - {killed_base}
    try:
        _sigkill(killed)
        assert _mounts_under(killed_base)  # nothing of the killed owner ran to unmount it
        async with open_gvisor() as box:
            assert (await box.exec(["cat", "data.txt"])).exit_code == 0
            assert not killed_base.exists() and _mounts_under(killed_base) == []
            assert live_base.exists() and _mounts_under(live_base)  # its owner still runs
    finally:
        _sigkill(live)
    async with open_gvisor():
        pass
    assert _bases(gvisor_options) == set()
    # The containers end with their owners by themselves (the supervisor's stdin closes), a
    # moment after the SIGKILL: nothing of ours is left to notify us, so poll.
    for _ in range(150):
        if not runsc_processes():
            break
        await anyio.sleep(0.1)
    assert runsc_processes() == []


def test_a_reused_pid_does_not_keep_a_dead_owners_directory(tmp_path: Path) -> None:
    """The mark holds pid and start time: a live process that got the dead owner's pid is not it."""
    ours, reused, unmarked, foreign = (tmp_path / name for name in ("ours", "reused", "unmarked", "foreign"))
    claim(ours)
    reused.mkdir()
    (reused / OWNER_FILE).write_text(f"{os.getpid()}:1")  # our pid, another start time
    unmarked.mkdir()  # being set up right now: no mark yet
    foreign.mkdir()
    (foreign / OWNER_FILE).write_text("not a mark")
    assert sweep(tmp_path) == [reused]
    assert ours.exists() and unmarked.exists() and foreign.exists() and not reused.exists()
