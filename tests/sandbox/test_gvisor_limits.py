"""Limits of a command in the gVisor sandbox end it with a result that says which limit."""

import errno
from pathlib import Path

import anyio
import pytest

from sandbox.limits import SandboxLimits
from sandbox.result import ExecResult
from sandbox.session import Sandbox
from tests.sandbox.conftest import OpenGvisor

pytestmark = [pytest.mark.anyio, pytest.mark.gvisor]

FORK_BOMB = "import os\nwhile True:\n    os.fork()\n"
MEMORY_BOMB = "chunks = []\nwhile True:\n    chunks.append(bytearray(32 * 1024 * 1024))\n"


async def run_while_using_the_host(sandbox: Sandbox, *commands: list[str]) -> tuple[list[ExecResult], int]:
    """Runs the commands in the sandbox while the host keeps starting processes beside them;
    returns the results and how many host processes ran (each within 10 s) meanwhile."""
    done = anyio.Event()
    results: list[ExecResult] = []
    host_runs = 0

    async def run_commands() -> None:
        for argv in commands:
            results.append(await sandbox.exec(argv, timeout_s=20))
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_commands)
        while not done.is_set():
            with anyio.fail_after(10):
                await anyio.run_process(["true"])
            host_runs += 1
    return results, host_runs


async def test_a_fork_bomb_ends_with_a_process_limit_error_while_the_host_stays_responsive(
    limits: SandboxLimits, open_gvisor: OpenGvisor
) -> None:
    """RLIMIT_NPROC inside the sandbox refuses the forks; the host still runs processes."""
    # Memory generous enough that the process limit is the one that binds: each forked task also
    # costs gVisor memory, and on a loaded host 64 of them once reached the 256 MB cgroup first.
    limits = limits.model_copy(update={"memory_mb": 1024})
    async with open_gvisor(limits=limits) as sandbox:
        (bomb, after), host_runs = await run_while_using_the_host(
            sandbox, ["python3", "-c", FORK_BOMB], ["echo", "still here"]
        )
    assert host_runs >= 1
    assert bomb.exit_code not in (0, None) and not bomb.timed_out
    assert "Resource temporarily unavailable" in bomb.stderr
    assert after.stdout == "still here\n"


async def test_a_memory_bomb_is_reported_as_such_and_the_next_command_of_the_reused_sandbox_runs(
    open_gvisor: OpenGvisor,
) -> None:
    """The memory cgroup kills the sandbox; the result says so, the host stays responsive,
    and a fresh sandbox takes the next command."""
    async with open_gvisor() as sandbox:
        (bomb, after), host_runs = await run_while_using_the_host(
            sandbox, ["python3", "-c", MEMORY_BOMB], ["echo", "next command"]
        )
    assert host_runs >= 1
    assert bomb.exit_code is None and not bomb.timed_out
    assert "memory limit of 256 MB" in bomb.stderr
    assert after.exit_code == 0 and after.stdout == "next command\n"


async def test_an_infinite_loop_is_killed_within_the_timeout_plus_one_second(open_gvisor: OpenGvisor) -> None:
    """Wall-clock timeout, reported as timed out with no exit code."""
    async with open_gvisor() as sandbox:
        result = await sandbox.exec(["python3", "-c", "while True: pass"], timeout_s=1.0)
        after = await sandbox.exec(["true"])
    assert result.timed_out and result.exit_code is None
    assert result.duration_s < 1.0 + 1.0
    assert "killed at the 1 s timeout" in result.stderr
    assert after.exit_code == 0


async def test_cpu_time_is_limited_although_gvisor_ignores_rlimit_cpu(open_gvisor: OpenGvisor) -> None:
    """Our choice: the in-sandbox supervisor measures CPU time and kills at the limit."""
    limits = SandboxLimits(cpu_time_s=1, timeout_s=30)
    async with open_gvisor(limits=limits) as sandbox:
        result = await sandbox.exec(["python3", "-c", "while True: pass"])
    assert result.exit_code is None and not result.timed_out
    assert "CPU time limit of 1 s" in result.stderr


async def test_ten_megabytes_of_output_come_back_truncated_with_head_tail_and_marker(
    limits: SandboxLimits, open_gvisor: OpenGvisor
) -> None:
    """Output is capped (bounded memory in the caller) and the cut is marked."""
    code = "import sys\nsys.stdout.write('HEAD' + 'x' * 10_000_000 + 'TAIL')\n"
    async with open_gvisor() as sandbox:
        result = await sandbox.exec(["python3", "-c", code])
    assert result.exit_code == 0 and result.truncated
    assert len(result.stdout) < limits.output_bytes + 200
    assert result.stdout.startswith("HEAD") and result.stdout.endswith("TAIL")
    assert "bytes of stdout truncated" in result.stdout


async def test_filling_the_disk_from_the_sandbox_stops_at_the_workspace_cap(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """The workspace mirror is a tmpfs capped at its content plus workspace_write_mb."""
    limits = SandboxLimits(workspace_write_mb=8, file_size_mb=64)
    code = (
        "import errno\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        with open(f'fill-{n}.bin', 'wb') as f:\n"
        "            f.write(b'x' * 1024 * 1024)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print(n, exc.errno)\n"
    )
    async with open_gvisor(limits=limits) as sandbox:
        result = await sandbox.exec(["python3", "-c", code])
    written, error = map(int, result.stdout.split())
    assert error == errno.ENOSPC
    assert written <= 8
    host_bytes = sum([(await p.stat()).st_size async for p in anyio.Path(workspace).iterdir()])
    assert host_bytes <= 8 * 1024 * 1024
