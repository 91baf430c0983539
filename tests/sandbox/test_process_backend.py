"""The `process` backend: weaker, but with the same limits and clean-up a plain process allows.
These run everywhere (no runsc needed)."""

import os
import sys
from pathlib import Path

import anyio
import pytest

from sandbox.backend import open_sandbox
from sandbox.limits import SandboxLimits

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(timeout_s=20, memory_mb=512, output_bytes=4096)


async def test_every_result_names_the_weaker_backend_and_the_exit_code_comes_back(tmp_path: Path) -> None:
    """The process backend says so in every result."""
    async with open_sandbox(tmp_path, limits=LIMITS, backend="process") as sandbox:
        failed = await sandbox.exec(["sh", "-c", "echo out; echo err >&2; exit 7"])
        missing = await sandbox.exec(["no-such-command-anywhere"])
    assert (failed.backend, failed.exit_code, failed.stdout, failed.stderr) == (
        "process",
        7,
        "out\n",
        "err\n",
    )
    assert missing.backend == "process" and missing.exit_code == 127
    assert "no-such-command-anywhere" in missing.stderr


async def test_the_callers_environment_does_not_leak_into_a_process_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean environment on the fallback too."""
    monkeypatch.setenv("CODELOOP_CALLER_SECRET", "leaked-value")
    async with open_sandbox(tmp_path, limits=LIMITS, backend="process") as sandbox:
        result = await sandbox.exec(["env"], env={"PASSED": "yes"})
    assert "leaked-value" not in result.stdout and "PASSED=yes" in result.stdout


async def test_a_timeout_kills_the_command_and_the_daemons_it_started(tmp_path: Path) -> None:
    """Timeout kills the process group; daemons that left it die with the supervisor's sweep."""
    marker = f"codeloop-daemon-{os.getpid()}-{tmp_path.name}"
    script = f"(setsid bash -c 'exec -a {marker} sleep 1000' &); sleep 1000"
    async with open_sandbox(tmp_path, limits=LIMITS, backend="process") as sandbox:
        result = await sandbox.exec(["bash", "-c", script], timeout_s=1)
    assert result.timed_out and result.exit_code is None
    assert result.duration_s < 2.0
    leftovers = await anyio.run_process(["pgrep", "-f", marker], check=False)
    assert leftovers.stdout == b""


async def test_output_beyond_the_cap_is_truncated_on_the_process_backend(tmp_path: Path) -> None:
    """Output cap with a marker, the same as under gVisor."""
    async with open_sandbox(tmp_path, limits=LIMITS, backend="process") as sandbox:
        result = await sandbox.exec([sys.executable, "-c", "print('y' * 1_000_000)"])
    assert result.truncated and len(result.stdout) < 4096 + 200
    assert "bytes of stdout truncated" in result.stdout


async def test_cancelling_a_process_command_leaves_none_of_its_processes(tmp_path: Path) -> None:
    """On cancellation every process of the command is killed and reaped."""
    marker = f"codeloop-cancel-{os.getpid()}-{tmp_path.name}"
    async with open_sandbox(tmp_path, limits=LIMITS, backend="process") as sandbox:
        with anyio.move_on_after(1):
            await sandbox.exec(["bash", "-c", f"exec -a {marker} sleep 1000"])
        leftovers = await anyio.run_process(["pgrep", "-f", marker], check=False)
        again = await sandbox.exec(["echo", "again"])
    assert leftovers.stdout == b""
    assert again.stdout == "again\n"


async def test_a_relative_working_directory_is_inside_the_workspace(tmp_path: Path) -> None:
    """Our choice: cwd is relative to the workspace on both backends (/workspace/... is accepted too)."""
    (tmp_path / "sub").mkdir()
    async with open_sandbox(tmp_path, limits=LIMITS, backend="process") as sandbox:
        relative = await sandbox.exec(["pwd"], cwd="sub")
        sandbox_path = await sandbox.exec(["pwd"], cwd="/workspace/sub")
    expected = str(await anyio.Path(tmp_path / "sub").resolve())
    assert relative.stdout.strip() == sandbox_path.stdout.strip() == expected


@pytest.mark.slow
async def test_cpu_time_beyond_the_limit_is_reported_on_the_process_backend(tmp_path: Path) -> None:
    """A CPU-time limit; here RLIMIT_CPU, enforced by the host kernel."""
    limits = SandboxLimits(cpu_time_s=1, timeout_s=30)
    async with open_sandbox(tmp_path, limits=limits, backend="process") as sandbox:
        result = await sandbox.exec([sys.executable, "-c", "while True: pass"])
    assert result.exit_code is None and not result.timed_out
    assert "CPU time limit of 1 s" in result.stderr
