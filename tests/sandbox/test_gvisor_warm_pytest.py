"""Test runs in the pytest interpreter a gVisor sandbox keeps ready (`keep_warm`, `exec(warm=True)`):
the same results as a cold run, the payload's identity and limits, nothing of it reachable."""

import json
import sys
from pathlib import Path

import pytest

from sandbox.backend import open_sandbox
from sandbox.limits import SandboxLimits
from tests.sandbox.conftest import OpenGvisor

pytestmark = [pytest.mark.anyio, pytest.mark.gvisor]

PYTHON = sys.executable  # codeloop's interpreter: a virtualenv without system site-packages
RUNTIME = (Path(sys.prefix).resolve(),)
ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]

SUITE = """
import pytest

@pytest.fixture
def number():
    return 2

def test_passes(number):
    print("printed by the test")
    assert number + 1 == 3

def test_fails(number):
    assert number == 5, "expected failure"
"""

IDENTITY = """
import os, signal

def _warm_interpreters():
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
            except OSError:
                continue
            if b"warm_pytest.py" in cmdline and int(entry) != os.getpid():
                found.append(int(entry))
    return found

def test_identity_and_reach():
    assert (os.getuid(), os.geteuid(), os.getgid(), os.getgroups()) == (1000, 1000, 1000, [])
    status = open("/proc/self/status").read()
    assert "CapEff:\\t0000000000000000" in status and "CapPrm:\\t0000000000000000" in status
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed by now
            pass
    assert [link for link in links if link.startswith("socket:")] == []
    warm = _warm_interpreters()
    assert len(warm) == 1
    try:
        os.kill(warm[0], signal.SIGKILL)
    except PermissionError:
        pass
    else:
        raise AssertionError("the warm interpreter could be signalled")
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # one backend is enough here: the host side is the same `exec` call


async def test_a_warm_run_gives_a_cold_runs_results_and_sees_the_files_of_the_moment(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    (workspace / "test_suite.py").write_text(SUITE)
    junit = ["--junitxml=report.xml", "-o", "junit_family=xunit1"]
    async with open_gvisor(ro_paths=RUNTIME) as sandbox:
        prepared = await sandbox.keep_warm(PYTHON, ENV)
        warm = await sandbox.exec([*PYTEST, *junit, "-rA"], env=ENV, warm=True)
        warm_report = (workspace / "report.xml").read_text()
        cold = await sandbox.exec([*PYTEST, *junit, "-rA"], env=ENV)
        cold_report = (workspace / "report.xml").read_text()
        (workspace / "test_suite.py").write_text(SUITE.replace("number == 5", "number == 2"))
        again = await sandbox.exec(PYTEST, env=ENV, warm=True)
    assert prepared.warm, prepared.note
    assert (warm.warm, cold.warm, again.warm) == (True, False, True)
    assert warm.exit_code == cold.exit_code == 1
    for result in (warm, cold):
        assert "1 failed, 1 passed" in result.stdout
        assert "expected failure" in result.stdout and "printed by the test" in result.stdout
        assert "PytestAssertRewriteWarning" not in result.stdout + result.stderr
    for report in (warm_report, cold_report):
        assert 'tests="2"' in report and 'failures="1"' in report
    assert again.exit_code == 0 and "2 passed" in again.stdout


DRIVER = """
import sys, pytest
print("argv", sys.argv[1:], "path0", repr(sys.path[0]), "main", __name__)
sys.exit(pytest.main(sys.argv[1:]))
"""


async def test_a_script_that_drives_pytest_runs_warm_as_python_c_runs_it(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """The verifier's coverage run is `python -c SCRIPT ARGS` calling `pytest.main` itself: warm,
    it sees the argv, sys.path and `__main__` that `-c` gives, and an uncaught exception is
    reported and exits 1 as the interpreter would."""
    (workspace / "test_suite.py").write_text(SUITE)
    argv = [PYTHON, "-c", DRIVER, "-q", "-p", "no:cacheprovider", "test_suite.py"]
    async with open_gvisor(ro_paths=RUNTIME) as sandbox:
        prepared = await sandbox.keep_warm(PYTHON, ENV)
        warm = await sandbox.exec(argv, env=ENV, warm=True)
        cold = await sandbox.exec(argv, env=ENV)
        broken = await sandbox.exec([PYTHON, "-c", "raise ValueError('broken driver')"], env=ENV, warm=True)
    assert prepared.warm, prepared.note
    assert (warm.warm, cold.warm, broken.warm) == (True, False, True)
    assert warm.exit_code == cold.exit_code == 1
    for result in (warm, cold):
        assert (
            "argv ['-q', '-p', 'no:cacheprovider', 'test_suite.py'] path0 '' main __main__" in result.stdout
        )
        assert "1 failed, 1 passed" in result.stdout
    assert broken.exit_code == 1 and "ValueError: broken driver" in broken.stderr


async def test_an_if_ready_run_goes_cold_while_the_interpreter_imports_and_warm_once_it_is_ready(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    """`warm="if_ready"` never waits for the imports: right after `keep_warm` (pytest and every
    plugin still importing, over a second under gVisor) the run starts cold; once the interpreter
    has said it is ready, the same request runs warm. Both give the run's results."""
    (workspace / "test_suite.py").write_text(SUITE)
    async with open_gvisor(ro_paths=RUNTIME) as sandbox:
        prepared = await sandbox.keep_warm(PYTHON, ENV)
        early = await sandbox.exec(PYTEST, env=ENV, warm="if_ready")
        waited = await sandbox.exec(PYTEST, env=ENV, warm=True)
        ready = await sandbox.exec(PYTEST, env=ENV, warm="if_ready")
    assert prepared.warm, prepared.note
    assert (early.warm, waited.warm, ready.warm) == (False, True, True)
    for result in (early, waited, ready):
        assert result.exit_code == 1 and "1 failed, 1 passed" in result.stdout


async def test_a_warm_run_is_the_payload_user_and_cannot_reach_the_interpreter_it_came_from(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    (workspace / "test_identity.py").write_text(IDENTITY)
    async with open_gvisor(ro_paths=RUNTIME) as sandbox:
        await sandbox.keep_warm(PYTHON, ENV)
        first = await sandbox.exec(PYTEST, env=ENV, warm=True)
        second = await sandbox.exec(PYTEST, env=ENV, warm=True)
    assert first.warm and first.exit_code == 0, first.stdout + first.stderr
    assert second.warm and second.exit_code == 0, second.stdout + second.stderr


async def test_what_a_warm_run_leaves_running_is_killed_and_the_warm_interpreter_stays(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    (workspace / "test_daemon.py").write_text(
        "import subprocess\n\ndef test_daemon():\n"
        "    subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
    )
    lister = [
        PYTHON,
        "-c",
        "import os, json; print(json.dumps(sorted(open(f'/proc/{p}/cmdline','rb').read().split(b'\\0')[-2].decode() "
        "for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid())))",
    ]
    async with open_gvisor(ro_paths=RUNTIME) as sandbox:
        await sandbox.keep_warm(PYTHON, ENV)
        ran = await sandbox.exec(PYTEST, env=ENV, warm=True)
        listed = await sandbox.exec(lister)
        next_run = await sandbox.exec(PYTEST, env=ENV, warm=True)
    assert ran.warm and ran.exit_code == 0
    # Left: the supervisor and the warm interpreter, by their last arguments; no sleep.
    assert json.loads(listed.stdout) == ["1000", "init"]
    assert next_run.warm and next_run.exit_code == 0


async def test_a_warm_run_keeps_the_wall_clock_and_cpu_limits(
    workspace: Path, open_gvisor: OpenGvisor, limits: SandboxLimits
) -> None:
    (workspace / "test_slow.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(60)\n")
    (workspace / "test_spin.py").write_text("def test_spins():\n    while True:\n        pass\n")
    async with open_gvisor(ro_paths=RUNTIME, limits=limits.model_copy(update={"cpu_time_s": 1.0})) as sandbox:
        await sandbox.keep_warm(PYTHON, ENV)
        # While the interpreter imports pytest (over a second of CPU), its CPU time is not that
        # of the command running beside it.
        beside = await sandbox.exec(["sleep", "2"])
        spun = await sandbox.exec([*PYTEST, "test_spin.py"], env=ENV, warm=True, timeout_s=30)
        slept = await sandbox.exec([*PYTEST, "test_slow.py"], env=ENV, warm=True, timeout_s=3)
        after = await sandbox.exec(["echo", "still here"])
    assert beside.exit_code == 0, beside.stderr
    assert spun.warm and spun.exit_code is None and "CPU time limit" in spun.stderr
    assert slept.warm and slept.timed_out and slept.duration_s < 6
    assert after.stdout == "still here\n"


async def test_no_warm_interpreter_where_root_could_import_the_payloads_code(
    workspace: Path, open_gvisor: OpenGvisor
) -> None:
    (workspace / "test_suite.py").write_text(SUITE)
    async with open_gvisor(ro_paths=RUNTIME) as sandbox:
        by_path = await sandbox.keep_warm(PYTHON, {**ENV, "PYTHONPATH": "/tmp"})
        system = await sandbox.keep_warm("/usr/bin/python3", ENV)
        relative = await sandbox.keep_warm("python3", ENV)
        assert not by_path.warm and "PYTHONPATH" in by_path.note
        assert not system.warm and "virtualenv" in system.note
        assert not relative.warm
        # A run in another environment than the prepared one starts cold, with its results.
        assert (await sandbox.keep_warm(PYTHON, ENV)).warm
        other = await sandbox.exec(PYTEST, env={**ENV, "EXTRA": "1"}, warm=True)
    assert not other.warm and other.exit_code == 1 and "1 failed, 1 passed" in other.stdout


async def test_the_process_backend_runs_warm_requests_cold(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    limits = SandboxLimits(timeout_s=60)
    async with open_sandbox(tmp_path, limits=limits, backend="process") as sandbox:
        reply = await sandbox.keep_warm(PYTHON, ENV)
        result = await sandbox.exec(PYTEST, env=ENV, warm=True)
    assert not reply.warm and "process" in reply.note
    assert not result.warm and result.exit_code == 1 and "1 failed, 1 passed" in result.stdout
