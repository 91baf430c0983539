"""The `exec` server through the real MCP client, on a real sandbox: gVisor where runsc works, and
the process backend."""

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.server.mcpserver import MCPServer
from pydantic import JsonValue

from sandbox.backend import BackendChoice
from sandbox.gvisor import probe_runsc
from sandbox.limits import GvisorOptions, SandboxLimits
from tests.processes import processes_mentioning
from tests.tool_servers.ts_conformance import assert_valid
from tests.tool_servers.ts_helpers import Elicitor, stdio_params
from tool_servers.exec.server import build_exec_server
from tool_servers.exec.static_checks import split_checks
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions

pytestmark = pytest.mark.anyio

GVISOR = probe_runsc().works
NO_RUNSC = "runsc does not work here (needs runsc installed and root); see `codeloop doctor`"
# The gVisor halves are `gvisor` tests: `make test-fast` leaves them out, `make test` runs them.
BACKENDS = [
    pytest.param("gvisor", marks=[pytest.mark.gvisor, pytest.mark.skipif(not GVISOR, reason=NO_RUNSC)]),
    "process",
]
DEFAULT_BACKEND = "gvisor" if GVISOR else "process"
MODES = ["auto", "legacy"]  # 2026-07-28 (input_required round-trip) and the 2025-11-25 handshake

TEST_CALC = """\
from calc import add


def test_add_small_numbers():
    assert add(1, 2) == 3


def test_add_is_wrong_for_big_numbers():
    total = add(2, 2)
    assert total == 5, "two and two"


class TestSubtract:
    def test_subtract(self):
        raise ValueError("no subtraction yet")
"""


@pytest.fixture(autouse=True)
def _no_sandbox_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test picks its backend; a CODELOOP_SANDBOX of the developer's shell must not veto it."""
    monkeypatch.delenv("CODELOOP_SANDBOX", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small Python project: one module, a test file with a pass, an assertion failure and an
    exception, and a test file that cannot be imported."""
    root = tmp_path / "project"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests" / "test_calc.py").write_text(TEST_CALC)
    (root / "tests" / "test_broken.py").write_text("import not_a_module\n")
    return root


async def _call(
    server: MCPServer[object],
    tool: str,
    args: dict[str, JsonValue],
    *,
    elicitation_callback: ElicitationFnT | None = None,
) -> Any:
    """Call one tool in a fresh session; check structured content against the declared schema."""
    with anyio.fail_after(60):
        async with Client(server, elicitation_callback=elicitation_callback) as session:
            schemas = {t.name: t.output_schema for t in (await session.list_tools()).tools}
            result = await session.call_tool(tool, args)
    if not result.is_error:
        assert_valid(result.structured_content, schemas[tool])
    return result


@pytest.mark.parametrize("backend", BACKENDS)
async def test_run_tests_names_each_failing_test_with_its_location_and_message(
    project: Path, backend: BackendChoice
) -> None:
    """Run_tests returns the failing test's id and file:line, the message, and the counts."""
    result = await _call(build_exec_server(project, backend=backend), "run_tests", {})
    out = result.structured_content
    assert not result.is_error, result.content
    assert (out["passed"], out["failed"], out["errors"], out["backend"]) == (1, 2, 1, backend)
    assert out["exit_code"] == 1 and out["report_found"] and not out["timed_out"]
    failures = {f["test_id"]: f for f in out["failures"]}
    assert set(failures) == {
        "tests/test_calc.py::test_add_is_wrong_for_big_numbers",
        "tests/test_calc.py::TestSubtract::test_subtract",
        "tests/test_broken.py",
    }
    wrong = failures["tests/test_calc.py::test_add_is_wrong_for_big_numbers"]
    assert (wrong["outcome"], wrong["file"], wrong["line"]) == ("failed", "tests/test_calc.py", 10)
    assert "two and two" in wrong["message"] and "assert 4 == 5" in wrong["message"]
    assert "assert total == 5" in wrong["traceback"]
    raised = failures["tests/test_calc.py::TestSubtract::test_subtract"]
    assert raised["line"] == 15 and raised["message"] == "ValueError: no subtraction yet"
    broken = failures["tests/test_broken.py"]
    assert (broken["outcome"], broken["line"]) == ("error", 1) and "not_a_module" in broken["message"]
    assert "1 passed" in out["output_tail"]
    assert not (project / ".codeloop").exists()  # the report and its outbox are read and removed


@pytest.mark.slow
async def test_run_tests_runs_only_the_selected_node_ids(project: Path) -> None:
    """Our contract: `paths` takes pytest node ids relative to the root, and `keyword` is `-k`."""
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    args = {"paths": ["tests/test_calc.py::test_add_small_numbers", "tests/test_calc.py"], "keyword": "small"}
    out = (await _call(server, "run_tests", args)).structured_content
    assert (out["passed"], out["failed"], out["errors"], out["exit_code"]) == (1, 0, 0, 0)
    assert out["failures"] == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_run_command_returns_the_output_and_exit_code_of_an_allowlisted_program(
    project: Path, backend: BackendChoice
) -> None:
    """Allowlisted programs run at once in the sandbox; a failing exit status is a result, not an error."""
    elicitor = Elicitor("decline")
    code = "import calc, sys; print(calc.add(2, 3)); print('oops', file=sys.stderr); sys.exit(3)"
    result = await _call(
        build_exec_server(project, backend=backend),
        "run_command",
        {"argv": ["python", "-c", code]},
        elicitation_callback=elicitor,
    )
    out = result.structured_content
    assert not result.is_error, result.content
    assert (out["exit_code"], out["stdout"], out["stderr"]) == (3, "5\n", "oops\n")
    assert out["backend"] == backend and not out["timed_out"] and not out["truncated"]
    assert elicitor.questions == []


async def test_run_command_runs_in_the_given_directory_of_the_root(project: Path) -> None:
    """Our contract: `cwd` is relative to the root; a cwd outside it is refused before anything runs."""
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    with anyio.fail_after(60):
        async with Client(server) as client:
            listed = await client.call_tool("run_command", {"argv": ["ls"], "cwd": "tests"})
            escaped = await client.call_tool("run_command", {"argv": ["ls"], "cwd": "../"})
    assert listed.structured_content["stdout"].split() == ["test_broken.py", "test_calc.py"]
    assert escaped.structured_content["type"] == "permission_denied"


@pytest.mark.parametrize("mode", MODES)
async def test_a_command_off_the_allowlist_runs_only_when_the_user_accepts(project: Path, mode: str) -> None:
    """A command outside the exec allowlist asks through elicitation; declined does nothing, accepted runs."""
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    remove = {"argv": ["rm", "calc.py"]}
    declining, accepting = Elicitor("decline"), Elicitor("accept", approve=True)
    with anyio.fail_after(60):
        async with Client(server, mode=mode, elicitation_callback=declining) as client:
            declined = await client.call_tool("run_command", remove)
        assert (project / "calc.py").exists()
        async with Client(server, mode=mode, elicitation_callback=accepting) as client:
            accepted = await client.call_tool("run_command", remove)
    assert declined.structured_content["type"] == "permission_denied"
    assert "rm calc.py" in declining.questions[0] and "not on the exec allowlist" in declining.questions[0]
    assert not accepted.is_error and accepted.structured_content["exit_code"] == 0
    assert len(accepting.questions) == 1 and not (project / "calc.py").exists()


async def test_a_client_that_cannot_elicit_gets_needs_confirmation_and_nothing_runs(project: Path) -> None:
    """Without elicitation a high-risk command is needs_confirmation describing the command."""
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    result = await _call(server, "run_command", {"argv": ["sh", "-c", "rm calc.py"]})
    body = result.structured_content
    assert body["type"] == "needs_confirmation" and body["details"]["tool"] == "run_command"
    assert "sh -c 'rm calc.py'" in body["details"]["action"]
    assert (project / "calc.py").exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_run_static_checks_reports_a_syntax_error_and_an_undefined_name_with_path_and_line(
    project: Path, backend: BackendChoice
) -> None:
    """Run_static_checks (ruff and py_compile) gives structured findings: path, line, code, message."""
    (project / "pkg").mkdir()
    (project / "pkg" / "broken.py").write_text("x = 1\n\ndef f(:\n    pass\n")
    (project / "pkg" / "names.py").write_text("def g():\n    return missing_name\n")
    (project / "pkg" / "fine.py").write_text("import os\n")  # unused import: not in the correctness gate
    result = await _call(build_exec_server(project, backend=backend), "run_static_checks", {"paths": ["pkg"]})
    out = result.structured_content
    assert not result.is_error and not out["ok"] and out["backend"] == backend
    located = {(f["path"], f["line"], f["code"]) for f in out["findings"]}
    assert ("pkg/broken.py", 3, "syntax-error") in located
    assert ("pkg/names.py", 2, "F821") in located
    assert not any(f["path"] == "pkg/fine.py" for f in out["findings"])
    assert out["files_checked"] == 3
    assert [(r["tool"], r["exit_code"]) for r in out["runs"]] == [("ruff", 1), ("py_compile", 0)]


async def test_py_compile_catches_what_the_interpreter_rejects_and_clean_code_is_ok(project: Path) -> None:
    """Our choice: the compile step catches errors only the interpreter raises; no finding means ok."""
    (project / "pkg").mkdir()
    (project / "pkg" / "clean.py").write_text("def f():\n    return 1\n")
    # A name assigned before its `global` declaration: the compiler rejects it, ruff's parser does not.
    (project / "pkg" / "scoping.py").write_text("def f():\n    x = 1\n    global x\n")
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    with anyio.fail_after(60):
        async with Client(server) as client:
            clean = await client.call_tool("run_static_checks", {"paths": ["pkg/clean.py"]})
            scoping = await client.call_tool("run_static_checks", {"paths": ["pkg/scoping.py"]})
    assert clean.structured_content["ok"] and clean.structured_content["findings"] == []
    compiled = [f for f in scoping.structured_content["findings"] if f["tool"] == "py_compile"]
    assert [(f["path"], f["line"], f["code"]) for f in compiled] == [("pkg/scoping.py", 3, "syntax-error")]


def test_the_checks_output_is_cut_after_the_compile_pass_and_a_cut_short_pass_means_ruff_never_ran() -> None:
    """One command runs both checkers: ruff's JSON starts after the compile pass's last line."""
    compile_lines = '{"path": "a.py", "line": 1, "column": 2, "message": "SyntaxError: x"}\n{"checked": 2}\n'
    ruff_json = '[\n  {"code": "F821", "filename": "b.py"}\n]\n'
    assert split_checks(compile_lines + ruff_json) == (compile_lines, ruff_json)
    assert split_checks(compile_lines) == (compile_lines, "")
    cut = '{"path": "a.py", "line": 1, "column": 2, "message": "SyntaxError: x"}\n'
    assert split_checks(cut) == (cut, None)


async def test_without_the_execute_scope_exec_tools_are_hidden_and_refused(project: Path) -> None:
    """Tools need `execute`; without it they are not listed and a call names the scope."""
    server = build_exec_server(project, ServerOptions(scopes=frozenset({Scope.READ, Scope.WRITE})))
    with anyio.fail_after(20):
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
            refused = await client.call_tool("run_command", {"argv": ["ls"]})
    assert listed == []
    assert refused.structured_content["type"] == "permission_denied"
    assert refused.structured_content["details"]["missing_scope"] == "execute"


@pytest.mark.slow
async def test_a_command_past_its_timeout_is_a_timed_out_result_and_the_sandbox_keeps_serving(
    project: Path,
) -> None:
    """STYLE.md section 5: a timed-out command is data (timed_out, no exit code); the next command gets a fresh sandbox."""
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    sleep = {"argv": ["python", "-c", "import time; time.sleep(60)"], "timeout_s": 1}
    with anyio.fail_after(60):
        async with Client(server) as client:
            slow = await client.call_tool("run_command", sleep)
            after = await client.call_tool("run_command", {"argv": ["echo", "still here"]})
    assert not slow.is_error
    assert slow.structured_content["timed_out"] and slow.structured_content["exit_code"] is None
    assert "timeout" in slow.structured_content["stderr"]
    assert after.structured_content["stdout"] == "still here\n"


@pytest.mark.gvisor
@pytest.mark.skipif(not GVISOR, reason=NO_RUNSC)
async def test_one_sandbox_serves_every_call_and_is_replaced_after_a_memory_kill(project: Path) -> None:
    """Brief: one sandbox per server, reused across calls (its private /tmp persists); a command that
    exceeds the memory limit kills it, the result says so, and the next call gets a fresh one."""
    server = build_exec_server(project, backend="gvisor", limits=SandboxLimits(memory_mb=128))
    read_marker = {"argv": ["cat", "/tmp/marker"]}
    with anyio.fail_after(60):
        async with Client(server) as client:
            await client.call_tool(
                "run_command", {"argv": ["python", "-c", "open('/tmp/marker', 'w').write('m')"]}
            )
            reused = await client.call_tool("run_command", read_marker)
            hog = await client.call_tool("run_command", {"argv": ["python", "-c", "b = bytearray(1 << 29)"]})
            fresh = await client.call_tool("run_command", read_marker)
    assert reused.structured_content["stdout"] == "m"
    assert hog.structured_content["exit_code"] is None and "memory limit" in hog.structured_content["stderr"]
    assert fresh.structured_content["exit_code"] == 1 and "No such file" in fresh.structured_content["stderr"]


async def test_a_sandbox_that_cannot_start_is_a_sandbox_error(project: Path) -> None:
    """Sandbox failures are `sandbox_error` results; here the policy forbids the backend asked for."""
    server = build_exec_server(project, backend="gvisor", policy="process")
    result = await _call(server, "run_tests", {})
    body = result.structured_content
    assert body["type"] == "sandbox_error" and body["details"]["sandbox_error"] == "BackendForbidden"
    assert "CODELOOP_SANDBOX" in body["message"]


async def test_a_bad_sandbox_policy_is_a_policy_error_result_for_every_command(project: Path) -> None:
    """A CODELOOP_SANDBOX that is not gvisor, process or auto: the server still lists its tools,
    and each command is a `sandbox_error` of type PolicyError saying what is misconfigured."""
    server = build_exec_server(project, backend=DEFAULT_BACKEND, policy="docker")
    result = await _call(server, "run_command", {"argv": ["python", "-c", "print(1)"]})
    body = result.structured_content
    assert body["type"] == "sandbox_error" and body["details"]["sandbox_error"] == "PolicyError"
    assert "misconfigured" in body["message"] and "CODELOOP_SANDBOX='docker'" in body["message"]


HOSTILE_CONFTEST = """\
import pytest

LAUGHS = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
BOMB = f'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY l0 "lol">{LAUGHS}]><testsuite name="&l9;"/>'


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    # After pytest wrote its report: the tested code replaces it with an entity bomb.
    with open(session.config.option.xmlpath, "w") as report:
        report.write(BOMB)
"""


@pytest.mark.slow
async def test_a_hostile_report_written_by_the_tested_code_is_a_report_error(project: Path) -> None:
    """The tested code controls the JUnit report; a billion-laughs one is refused with a reason,
    in seconds, and the run's own facts (exit code, output) still come back."""
    (project / "conftest.py").write_text(HOSTILE_CONFTEST)
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    out = (await _call(server, "run_tests", {"paths": ["tests/test_calc.py"]})).structured_content
    assert not out["report_found"] and out["passed"] == out["failed"] == 0
    assert "declares a DTD or entities" in out["report_error"]
    assert out["exit_code"] == 1 and "1 passed" in out["output_tail"]


async def test_paths_are_confined_to_the_root_and_must_exist(project: Path) -> None:
    """Test and check paths outside the root are refused; missing ones are not_found."""
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    with anyio.fail_after(20):
        async with Client(server) as client:
            escaped = await client.call_tool("run_tests", {"paths": ["../outside.py"]})
            absolute = await client.call_tool("run_static_checks", {"paths": ["/etc"]})
            missing = await client.call_tool("run_tests", {"paths": ["tests/test_nothing.py::test_x"]})
            option = await client.call_tool("run_tests", {"paths": ["--collect-only"]})
    assert escaped.structured_content["type"] == "permission_denied"
    assert absolute.structured_content["type"] == "permission_denied"
    assert missing.structured_content["type"] == "not_found"
    assert option.structured_content["type"] == "invalid_arguments"


@pytest.mark.slow  # a `codeloop mcp` process
async def test_run_tests_through_a_real_stdio_server_process(project: Path) -> None:
    """`codeloop mcp exec --root DIR --scopes execute` runs the tests."""
    with anyio.fail_after(60):
        async with Client(stdio_params("exec", project, "--scopes", "execute")) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("run_tests", {"paths": ["tests/test_calc.py"]})
    assert tools == {"run_command", "run_tests", "run_static_checks", "run_example"}
    out = result.structured_content
    assert (out["passed"], out["failed"]) == (1, 2)
    assert any(
        f["test_id"].endswith("::test_add_is_wrong_for_big_numbers") and f["line"] == 10
        for f in out["failures"]
    )


@pytest.mark.slow  # a `codeloop mcp` process
async def test_the_roots_sandbox_limits_bound_the_commands_of_a_stdio_server(project: Path) -> None:
    """`codeloop mcp exec` gives its commands the `[sandbox]` limits of the root's configuration."""
    (project / "codeloop.toml").write_text("[sandbox]\ncpu_time_s = 2\n")
    with anyio.fail_after(60):
        async with Client(stdio_params("exec", project, "--scopes", "execute")) as client:
            result = await client.call_tool("run_command", {"argv": ["python", "-c", "while True: pass"]})
    out = result.structured_content
    assert out["exit_code"] is None and not out["timed_out"]
    assert "killed at the CPU time limit of 2 s" in out["stderr"]


@pytest.mark.slow
async def test_commands_use_the_workspace_virtualenv_and_pytest_falls_back_to_codeloops(
    project: Path,
) -> None:
    """Brief: `python` is the workspace's own virtualenv when it has one; pytest runs on codeloop's
    interpreter when that virtualenv has no pytest."""
    await anyio.run_process([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")])
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    with anyio.fail_after(60):
        async with Client(server) as client:
            prefix = await client.call_tool(
                "run_command", {"argv": ["python", "-c", "import sys; print(sys.prefix)"]}
            )
            tests = await client.call_tool("run_tests", {"paths": ["tests/test_calc.py"]})
    assert prefix.structured_content["stdout"].strip() == str(project / ".venv")
    assert tests.structured_content["python"] == sys.executable
    assert tests.structured_content["passed"] == 1


@pytest.mark.gvisor
@pytest.mark.skipif(not GVISOR, reason=NO_RUNSC)
async def test_the_sandbox_starts_at_the_first_command_and_dies_with_the_session(
    project: Path, tmp_path: Path
) -> None:
    """Brief: the server's lifespan owns its one sandbox: none before a command, none left (no runsc
    process, no workspace mirror mount) after the session ends."""
    gvisor = GvisorOptions(state_dir=tmp_path / "runsc-state", work_dir=tmp_path / "sandboxes")
    server = build_exec_server(project, backend="gvisor", gvisor=gvisor)
    with anyio.fail_after(60):
        async with Client(server) as client:
            await client.list_tools()
            before = processes_mentioning(gvisor.state_dir)
            await client.call_tool("run_command", {"argv": ["true"]})
            during = processes_mentioning(gvisor.state_dir)
    assert before == [] and during != []
    assert processes_mentioning(gvisor.state_dir) == []
    assert str(gvisor.work_dir) not in await anyio.Path("/proc/self/mounts").read_text()


@pytest.mark.slow
async def test_a_test_run_past_its_timeout_is_reported_as_timed_out(project: Path) -> None:
    """STYLE.md section 5: a test run killed at its timeout is a result with timed_out and the output so far."""
    (project / "tests" / "test_slow.py").write_text("import time\n\n\ndef test_slow():\n    time.sleep(60)\n")
    server = build_exec_server(project, backend=DEFAULT_BACKEND)
    result = await _call(server, "run_tests", {"paths": ["tests/test_slow.py"], "timeout_s": 3})
    out = result.structured_content
    assert not result.is_error
    assert out["timed_out"] and out["exit_code"] is None and not out["report_found"]
    assert "timeout" in out["output_tail"]


async def test_a_report_directory_symlinked_out_of_the_root_is_refused(project: Path, tmp_path: Path) -> None:
    """The host never writes pytest's report through a `.codeloop` link leading out of the root."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".codeloop").symlink_to(elsewhere)
    result = await _call(build_exec_server(project, backend=DEFAULT_BACKEND), "run_tests", {})
    assert result.structured_content["type"] == "permission_denied"
    assert list(elsewhere.iterdir()) == []
