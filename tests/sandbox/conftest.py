"""Sandbox test set-up: both anyio backends, real runsc, and a check that nothing of ours survives.

Every gVisor test gets its own runsc state directory and work directory under the test's tmp
path, so the autouse check can tell our runsc processes and mirror mounts from anyone else's.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path

import pytest

from sandbox.backend import open_sandbox
from sandbox.gvisor import probe_runsc
from sandbox.limits import GvisorOptions, SandboxLimits
from sandbox.session import Sandbox
from tests.processes import processes_mentioning

# What the `open_gvisor` fixture gives: `open_sandbox` with the gVisor set-up of the test bound.
OpenGvisor = Callable[..., AbstractAsyncContextManager[Sandbox]]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The sandbox is written against anyio and promised to work on both backends."""
    return request.param


def _mounts_under(directory: Path) -> list[str]:
    return [line for line in Path("/proc/self/mounts").read_text().splitlines() if str(directory) in line]


@pytest.fixture
def gvisor_options(tmp_path: Path) -> Iterator[GvisorOptions]:
    """Options pointing runsc at private directories; after the test, none of its runsc
    processes and none of its workspace mirror mounts may remain."""
    status = probe_runsc()
    if not status.works:
        pytest.skip(f"runsc does not work here: {status.detail}")
    options = GvisorOptions(state_dir=tmp_path / "runsc-state", work_dir=tmp_path / "sandboxes")
    yield options
    assert processes_mentioning(str(options.state_dir)) == []
    assert _mounts_under(options.work_dir) == []


@pytest.fixture
def limits() -> SandboxLimits:
    return SandboxLimits(timeout_s=30, memory_mb=256, max_processes=64, output_bytes=64_000)


@pytest.fixture
def runsc_processes(gvisor_options: GvisorOptions) -> Callable[[], list[str]]:
    """Lists the live runsc processes of this test's sandboxes, for checks in mid-test."""
    return lambda: processes_mentioning(str(gvisor_options.state_dir))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace beside (not above) the runsc state of `gvisor_options`."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def open_gvisor(workspace: Path, gvisor_options: GvisorOptions, limits: SandboxLimits) -> OpenGvisor:
    """Opens a gVisor sandbox on this test's workspace, limits and private runsc directories;
    keyword arguments (e.g. `ro_paths`) go on to `open_sandbox`."""
    return partial(open_sandbox, workspace, limits=limits, backend="gvisor", gvisor=gvisor_options)
