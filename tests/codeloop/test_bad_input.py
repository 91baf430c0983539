"""Errors, not tracebacks: each command run with its bad input prints one line naming what
failed, exits with the right code, and changes nothing."""

import json
import os
import signal
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.codeloop.serve_support import CODELOOP, codeloop_env
from tests.processes import processes_mentioning

pytestmark = pytest.mark.anyio


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its content (None for directories): "nothing changed"."""
    return {str(p): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


async def _codeloop(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([*CODELOOP, *args], env=codeloop_env(home), check=False)


def _one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    message = result.stderr.decode().strip()
    assert "Traceback" not in message and len(message.splitlines()) == 1, message
    return message


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("missing-dir/schema.json", "No such file or directory"),
        (".", "Is a directory"),
        ("afile.txt/schema.json", "a file is where a directory must be"),
    ],
)
async def test_schema_to_a_bad_path_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, target: str, why: str
) -> None:
    """`schema -o` writes through a temporary file renamed into place, so a failure leaves nothing."""
    (tmp_path / "afile.txt").write_text("keep\n")
    before = _tree(tmp_path)
    result = await _codeloop(tmp_path / "home", "schema", "-o", str(tmp_path / target))
    assert result.returncode == 2
    assert _one_line(result) == f"error: cannot write the schemas to {tmp_path / target}: {why}"
    assert _tree(tmp_path) == before


@pytest.mark.slow  # several commands, each building or refusing an index
async def test_an_index_dir_that_is_a_file_or_proc_or_a_codeloop_file_is_refused(tmp_path: Path) -> None:
    """`index --index-dir` on a file or /proc, or a repository whose `.codeloop` is a file: one
    line naming the path, exit 2, the file untouched."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("def f():\n    return 1\n")
    (tmp_path / "afile").write_text("not an index\n")
    cases = [
        (
            ["--index-dir", str(tmp_path / "afile")],
            f"{tmp_path / 'afile'}: a file is where a directory must be",
        ),
        (["--index-dir", "/proc"], "/proc/"),
    ]
    before = _tree(tmp_path)
    for extra, expected in cases:
        result = await _codeloop(tmp_path / "home", "index", str(repo), "--json", *extra)
        assert result.returncode == 2
        assert expected in _one_line(result) and "--index-dir" in result.stderr.decode()
    assert _tree(tmp_path) == before
    (repo / ".codeloop").write_text("a file, not our directory\n")
    before = _tree(tmp_path)
    result = await _codeloop(tmp_path / "home", "index", str(repo), "--json")
    assert result.returncode == 2
    assert "a file is where a directory must be" in _one_line(result)
    assert _tree(tmp_path) == before  # (a served root's state lives in the home: `mcp` never minds it)


async def test_audit_verify_of_a_non_utf8_file_reports_damage_instead_of_crashing(tmp_path: Path) -> None:
    """A damaged log is a finding of the check (exit 1, the line named), not a UnicodeDecodeError."""
    log = tmp_path / "audit.jsonl"
    log.write_bytes(b'\xff\xfe{"seq": 1}\n')
    result = await _codeloop(tmp_path / "home", "audit", "verify", str(log))
    assert result.returncode == 1
    assert "line 1: not UTF-8 text (byte 0)" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()
    assert log.read_bytes() == b'\xff\xfe{"seq": 1}\n'


@pytest.mark.slow  # each case loads every installed role
@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (
            ["--role", "bogus"],
            2,
            # Then every installed role: the built-ins and whichever plug-ins this environment has.
            "error: --role: role 'bogus' is not installed; installed roles: coder, echo, planner, retriever, ",
        ),
        (["--replicas", "3"], 2, "error: --replicas 3 needs a cluster of at least 3 servers"),
        (
            ["--workspace-url", "http://ws:8700"],
            2,
            "error: --workspace-host, --workspace-port and --workspace-url configure --workspaces",
        ),
        (
            ["--workspaces", "--workspace-url", "ws:8700"],
            2,
            "error: --workspace-url 'ws:8700' is no http:// or https:// URL",
        ),
        (
            ["--role", "planner", "--workspace-service"],
            2,
            "error: --workspace-service is for a coder or verifier",
        ),
        (
            ["--swebench-repos", "/"],
            2,
            "error: --swebench-repos is for SWE-bench workers: add --role swebench",
        ),
        (
            ["--role", "swebench", "--swebench-repos", "/no/such/repos"],
            2,
            "error: --swebench-repos /no/such/repos is not a directory",
        ),
    ],
)
async def test_serve_validates_roles_and_replicas_before_starting_anything(
    tmp_path: Path, args: list[str], code: int, expected: str
) -> None:
    """The state directory is not even created: nothing started."""
    home = tmp_path / "home"
    result = await _codeloop(home, "serve", "--no-mcp", *args)
    assert result.returncode == code
    assert _one_line(result).startswith(expected)
    if "is not installed" in expected:  # the roles serve runs beside the installed ones are named too
        assert _one_line(result).endswith("; besides them serve runs orchestrator and swebench")
    assert not home.exists()


@pytest.mark.slow
async def test_serve_names_the_path_of_an_os_error_even_without_tool_servers(tmp_path: Path) -> None:
    """An OSError used to be reported as "cannot host the tool servers" even with --no-mcp."""
    home = tmp_path / "home"
    home.write_text("a file where the state directory should be\n")
    result = await _codeloop(home, "serve", "--no-mcp")
    assert result.returncode == 1
    assert _one_line(result) == f"error: cannot serve: {home}: a file is where a directory must be"
    assert home.read_text() == "a file where the state directory should be\n"


@pytest.mark.slow
async def test_ctrl_c_with_a_tool_call_in_flight_stops_serve_without_a_traceback(tmp_path: Path) -> None:
    """A hosted tool call still running at Ctrl-C is cancelled with one log line, not uvicorn's
    40-frame "Exception in ASGI application"."""
    home, root = tmp_path / "home", tmp_path / "root"
    root.mkdir()
    serve = await anyio.open_process(
        [*CODELOOP, "serve", "--json", "--mcp-root", str(root), "--mcp-scopes", "read,execute"],
        # The process backend, so the command in flight is a host process the test can see.
        env={**codeloop_env(home), "CODELOOP_SANDBOX": "process"},
    )
    try:
        assert serve.stdout is not None and serve.stderr is not None
        with anyio.fail_after(60):
            buffer = b""
            while b"\n" not in buffer:
                buffer += await serve.stdout.receive()
            note = json.loads(buffer.split(b"\n", 1)[0])
            tokens = await anyio.Path(note["mcp"]["token_file"]).read_text()
            token = next(line.split()[0] for line in tokens.splitlines() if not line.startswith("#"))
            marker = f"in-flight-{tmp_path.name}"
            sleeper = {"argv": ["python3", "-c", f"import time; time.sleep(60)  # {marker}"]}
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
                async with Client(
                    streamable_http_client(note["mcp"]["urls"]["exec"], http_client=http)
                ) as client:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_call_until_shutdown, client, sleeper)
                        await _wait_for_process(marker)  # the call is running
                        serve.send_signal(signal.SIGINT)
                        serve.send_signal(signal.SIGINT)
                        code = await serve.wait()
                        tg.cancel_scope.cancel()
            errors = (await serve.stderr.receive(1 << 20)).decode()
    finally:
        with anyio.CancelScope(shield=True):
            if serve.returncode is None:
                os.kill(serve.pid, signal.SIGKILL)
            await serve.wait()
            await serve.aclose()
    assert code == 0
    assert "Traceback" not in errors and "a tool call still running at shutdown was cancelled" in errors


async def _call_until_shutdown(client: Client, args: dict[str, list[str]]) -> None:
    """The call in flight; it ends in an error when the server goes away, which is expected."""
    try:
        await client.call_tool("run_command", args)
    except Exception:  # the server shut down under it: the point of the test
        return


async def _wait_for_process(marker: str) -> None:
    """Until a process whose command line holds `marker` runs. Polled: nothing notifies us."""
    for _ in range(600):
        if processes_mentioning(marker):
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"no process running {marker}")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["mcp", "fs", "--root", "{tmp}/missing"], "error: --root {tmp}/missing is not a directory"),
        (
            ["mcp", "fs", "--root", "{tmp}", "--transport", "carrier-pigeon"],
            "error: --transport must be stdio or http",
        ),
        (["mcp", "nosuch", "--root", "{tmp}"], "error: unknown server 'nosuch'; choose one of:"),
        (["audit", "verify", "{tmp}"], "error: {tmp} is not a file: pass the audit log"),
        (["doctor", "--platform", "bogus"], "error: --platform 'bogus' is not one of ptrace, kvm"),
        (
            ["search", "anything", "--repo", "{tmp}/missing"],
            "error: repository '{tmp}/missing' does not exist",
        ),
        (["trace", "not a task id"], "error: task id 'not a task id' may only contain"),
        (
            ["sandbox", "exec", "--workspace", "{tmp}/missing", "--", "true"],
            "error: --workspace {tmp}/missing is not an existing directory",
        ),
    ],
)
async def test_every_command_fails_a_wrong_command_line_with_exit_2_and_one_line(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    """One helper for every command: a usage error is exit 2 and one `error:` line saying what to
    change (README "Exit codes"). `mcp` and `search` used their own (red, and exit 2 for failures too)."""
    result = await _codeloop(tmp_path / "home", *[a.format(tmp=tmp_path) for a in args])
    assert result.returncode == 2
    assert _one_line(result).startswith(expected.format(tmp=tmp_path))


async def test_a_command_that_fails_at_run_time_exits_1_not_2(tmp_path: Path) -> None:
    """A tool server that cannot bind its port failed; the command line was fine (it was exit 2)."""
    import socket

    tokens = tmp_path / "tokens"
    tokens.write_text("tok-0123456789abcdef0123456789abcdef alice read\n")
    tokens.chmod(0o600)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = [
            "--root",
            str(tmp_path),
            "--transport",
            "http",
            "--token-file",
            str(tokens),
            "--port",
            str(port),
        ]
        with anyio.fail_after(60):
            result = await _codeloop(tmp_path / "home", "mcp", "fs", *args)
    assert result.returncode == 1
    last = result.stderr.decode().strip().splitlines()[-1]
    assert last == f"error: cannot serve on 127.0.0.1:{port} (see the log above)"
    assert "Traceback" not in result.stderr.decode()
