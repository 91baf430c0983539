"""A sandbox ends with its owner: SIGKILL the process holding it mid-command and nothing of the
sandbox keeps running (the supervisor watches its channel during commands; runsc gets a
parent-death signal)."""

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from sandbox.leftovers import sweep
from sandbox.limits import GvisorOptions
from tests.processes import processes_mentioning

OWNER = Path(__file__).with_name("sandbox_owner.py")
ROOT = Path(__file__).parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the owner is a separate process; the test's own loop does not matter


def _processes_in(directory: Path) -> list[int]:
    """Live processes whose working directory is `directory` (the command of a process sandbox)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == directory:
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


async def _start_owner(backend: str, workspace: Path, options: GvisorOptions) -> Process:
    owner = await anyio.open_process(
        [sys.executable, str(OWNER), backend, str(workspace), str(options.state_dir), str(options.work_dir)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert owner.stdout is not None
    with anyio.fail_after(30):
        line = await BufferedByteReceiveStream(owner.stdout).receive_until(b"\n", 100)
    assert line == b"started"
    return owner


async def _kill(owner: Process) -> None:
    owner.send_signal(signal.SIGKILL)
    await owner.wait()
    await owner.aclose()


async def _wait_until(check: Callable[[], bool], timeout_s: float) -> None:
    """Polled: what is checked (processes, runsc's state) sends no notification."""
    with anyio.fail_after(timeout_s):
        for _ in itertools.count():
            if check():
                return
            await anyio.sleep(0.05)


@pytest.mark.anyio
@pytest.mark.gvisor
async def test_sigkilling_the_owner_of_a_gvisor_sandbox_ends_its_container_within_3_s(
    workspace: Path, gvisor_options: GvisorOptions
) -> None:
    """A sandbox running `sleep 120` whose owner is SIGKILLed is gone within 3 s, not after
    the command's timeout."""
    owner = await _start_owner("gvisor", workspace, gvisor_options)
    try:

        def sleeping() -> bool:
            listed = subprocess.run(
                ["runsc", "--root", str(gvisor_options.state_dir), "list", "-quiet"],
                capture_output=True,
                text=True,
            )
            for container in listed.stdout.split():
                ps = subprocess.run(
                    ["runsc", "--root", str(gvisor_options.state_dir), "ps", container],
                    capture_output=True,
                    text=True,
                )
                if "sleep" in ps.stdout:
                    return True
            return False

        await _wait_until(sleeping, 20)
        assert processes_mentioning(gvisor_options.state_dir) != []
    finally:
        await _kill(owner)
    await _wait_until(lambda: processes_mentioning(gvisor_options.state_dir) == [], 3)
    # The workspace mirror (a tmpfs) is left for the next sandbox opened to sweep, as designed.
    assert sweep(gvisor_options.work_dir) != []


@pytest.mark.anyio
async def test_sigkilling_the_owner_of_a_process_sandbox_kills_its_command(tmp_path: Path) -> None:
    """The process backend's supervisor also ends the running command when its owner dies."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    options = GvisorOptions(state_dir=tmp_path / "unused-state", work_dir=tmp_path / "unused-work")
    owner = await _start_owner("process", workspace, options)
    try:
        await _wait_until(lambda: len(_processes_in(workspace)) >= 2, 10)  # supervisor + sleep
    finally:
        await _kill(owner)
    await _wait_until(lambda: _processes_in(workspace) == [], 3)
