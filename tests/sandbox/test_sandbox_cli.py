"""`codeloop sandbox exec`: its CLI contract, through the real command line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.gvisor import probe_runsc

CONTRACT_KEYS = {
    "exit_code",
    "stdout",
    "stderr",
    "timed_out",
    "backend",
    "duration_s",
    "truncated",
    "warning",
    "environment",
}
"""The contract's fields, extended by `warning` (None under gVisor, set whenever the process backend ran)
and `environment` (the workspace's project environment; None when it has none)."""


def codeloop(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "CODELOOP_SANDBOX"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "codeloop", *args], capture_output=True, text=True, env=environ, timeout=120
    )


@pytest.mark.slow
def test_json_output_has_exactly_the_contract_fields_under_gvisor(tmp_path: Path) -> None:
    """--json prints exit_code, stdout, stderr, timed_out, backend, duration_s, truncated."""
    if not probe_runsc().works:
        pytest.skip(f"runsc does not work here: {probe_runsc().detail}")
    done = codeloop(
        "sandbox",
        "exec",
        "--workspace",
        str(tmp_path),
        "--backend",
        "gvisor",
        "--network",
        "none",
        "--timeout",
        "30",
        "--memory-mb",
        "256",
        "--json",
        "--",
        "sh",
        "-c",
        "echo hi; exit 3",
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert set(printed) == CONTRACT_KEYS
    assert (printed["exit_code"], printed["stdout"], printed["backend"]) == (3, "hi\n", "gvisor")
    assert printed["timed_out"] is False and printed["truncated"] is False and printed["warning"] is None
    assert isinstance(printed["duration_s"], float)


def test_without_json_it_behaves_like_the_command(tmp_path: Path) -> None:
    """The command's output on the same streams and its exit code."""
    done = codeloop(
        "sandbox",
        "exec",
        "--workspace",
        str(tmp_path),
        "--backend",
        "process",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 5",
    )
    assert (done.returncode, done.stdout, done.stderr) == (5, "out\n", "err\n")


@pytest.mark.slow
def test_a_timed_out_command_exits_124_like_coreutils_timeout(tmp_path: Path) -> None:
    """Our choice, documented in --help: 124 on timeout, as timeout(1)."""
    done = codeloop(
        "sandbox",
        "exec",
        "--workspace",
        str(tmp_path),
        "--backend",
        "process",
        "--timeout",
        "0.5",
        "--json",
        "--",
        "sleep",
        "30",
    )
    assert json.loads(done.stdout)["timed_out"] is True
    plain = codeloop(
        "sandbox",
        "exec",
        "--workspace",
        str(tmp_path),
        "--backend",
        "process",
        "--timeout",
        "0.5",
        "--",
        "sleep",
        "30",
    )
    assert plain.returncode == 124


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workspace", "/nonexistent/dir"], "is not an existing directory"),
        (["--network", "host"], "sandboxes have no network"),
        (["--backend", "docker"], "is not one of gvisor, process"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """Brief: clear errors on bad input, non-zero exit, no traceback."""
    base = ["--workspace", str(tmp_path)] if "--workspace" not in args else []
    done = codeloop("sandbox", "exec", *base, *args, "--", "true")
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_forbidden_backend_exits_125_naming_the_policy(tmp_path: Path) -> None:
    """CODELOOP_SANDBOX=gvisor lets a deployment forbid the process fallback."""
    done = codeloop(
        "sandbox",
        "exec",
        "--workspace",
        str(tmp_path),
        "--backend",
        "process",
        "--",
        "true",
        env={"CODELOOP_SANDBOX": "gvisor"},
    )
    assert done.returncode == 125
    assert "CODELOOP_SANDBOX=gvisor" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("environment", "advice"),
    [
        ("none", "--environment none runs the system's programs only (there, Python is `python3`)"),
        ("auto", "that PATH is the workspace's environment (or codeloop's own interpreter when it has none)"),
    ],
)
def test_a_program_the_sandbox_cannot_find_is_named_with_the_path_and_what_to_do(
    tmp_path: Path, environment: str, advice: str
) -> None:
    """Our choice: `python` under `--environment none` (or any missing program) exits 127, as a
    shell does, with the sandbox's PATH and what would run it, not a bare `No such file`."""
    program = "python" if environment == "none" else "no-such-program"
    done = codeloop(
        "sandbox", "exec", "--workspace", str(tmp_path), "--environment", environment, "--", program, "-V"
    )
    assert done.returncode == 127, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("warning: ")]
    assert lines[0].startswith(
        f"codeloop sandbox: cannot run '{program}': no such program on the sandbox's PATH ("
    )
    assert "/usr/bin" in lines[0] and advice in lines[1]
