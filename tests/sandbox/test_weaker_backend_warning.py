"""The weaker process backend never runs silently: results, the CLI and the exec server say so."""

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from sandbox.backend import open_sandbox
from sandbox.limits import GvisorOptions, SandboxLimits
from tool_servers.exec.server import build_exec_server
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions

MISSING_RUNSC = GvisorOptions(runsc="/nonexistent/bin/runsc")
CODELOOP = str(Path(sys.executable).with_name("codeloop"))
pytestmark = pytest.mark.anyio


async def test_every_result_of_a_fallback_sandbox_names_the_fallback_and_why(tmp_path: Path) -> None:
    """`auto` with runsc unusable falls back to the process backend; each result carries a warning
    naming the cause and the missing isolation."""
    with anyio.fail_after(30):
        async with open_sandbox(tmp_path, limits=SandboxLimits(), gvisor=MISSING_RUNSC, policy="auto") as box:
            results = [await box.exec([sys.executable, "-c", "print(1)"]) for _ in range(2)]
    for result in results:
        assert result.backend == "process" and result.stdout == "1\n"
        assert result.warning is not None
        assert (
            "gVisor is unusable here" in result.warning
            and "no filesystem, network or kernel isolation" in result.warning
        )


async def test_a_chosen_process_backend_says_so_too(tmp_path: Path) -> None:
    """Chosen explicitly, the process backend is still named as the weaker one."""
    with anyio.fail_after(30):
        async with open_sandbox(tmp_path, limits=SandboxLimits(), policy="process") as box:
            result = await box.exec([sys.executable, "-c", "pass"])
    assert result.warning is not None and "CODELOOP_SANDBOX=process" in result.warning


def _sandbox_exec(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # No runsc on PATH: `auto` must fall back (the host's runsc lives in /usr/bin).
    env = {**os.environ, "PATH": str(tmp_path / "empty-bin"), "CODELOOP_SANDBOX": "auto"}
    return subprocess.run(
        [
            CODELOOP,
            "sandbox",
            "exec",
            "--workspace",
            str(tmp_path),
            *extra,
            "--",
            sys.executable,
            "-c",
            "print(7)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_the_cli_warns_on_stderr_in_text_mode_and_in_the_json_result(tmp_path: Path) -> None:
    """`codeloop sandbox exec` behaves like the command, plus one warning line on stderr; with
    --json the warning is a field of the result."""
    text = _sandbox_exec(tmp_path)
    assert text.returncode == 0 and text.stdout == "7\n"
    assert text.stderr.startswith("warning: weaker sandbox: gVisor is unusable here")
    as_json = _sandbox_exec(tmp_path, "--json")
    result = json.loads(as_json.stdout)
    assert result["backend"] == "process" and "gVisor is unusable here" in result["warning"]


async def test_exec_server_results_say_the_weaker_backend_ran_them(tmp_path: Path) -> None:
    """run_command returns the warning in its structured result, so the model and the person see it."""
    (tmp_path / "ok.py").write_text("x = 1\n")
    server = build_exec_server(
        tmp_path, ServerOptions(scopes=frozenset({Scope.READ, Scope.EXECUTE})), gvisor=MISSING_RUNSC
    )
    with anyio.fail_after(60):
        async with Client(server) as client:
            ran = await client.call_tool("run_command", {"argv": ["python", "-c", "print(2)"]})
            checked = await client.call_tool("run_static_checks", {"paths": ["ok.py"]})
    assert ran.structured_content["backend"] == "process"
    assert "gVisor is unusable here" in ran.structured_content["warning"]
    assert "gVisor is unusable here" in checked.structured_content["warning"]
