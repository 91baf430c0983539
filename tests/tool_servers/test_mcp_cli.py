"""`codeloop mcp` refuses bad input with a clear message, a non-zero exit and no traceback."""

import subprocess
from pathlib import Path

import pytest

from tests.tool_servers.ts_helpers import CODELOOP


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CODELOOP, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mcp", "ftp", "--root", "{root}"], "unknown server 'ftp'"),
        (["mcp", "fs", "--root", "{root}/missing"], "is not a directory"),
        (["mcp", "fs", "--root", "{root}", "--scopes", "read,admin"], "unknown scope 'admin'"),
        (["mcp", "fs", "--root", "{root}", "--transport", "sse"], "--transport must be stdio or http"),
        (["mcp", "fs", "--root", "{root}", "--transport", "http"], "needs --token-file"),
        (
            ["mcp", "fs", "--root", "{root}", "--transport", "http", "--token-file", "{root}/none"],
            "cannot read token file",
        ),
        (
            ["mcp", "fs", "--root", "{root}", "--transport", "http", "--token-file", "{root}/bad"],
            "bad:1: expected",
        ),
        (["audit", "verify", "{root}/none.jsonl"], "is not a file"),
        (["mcp", "tasks", "--root", "{root}/missing"], "is not a directory"),
        (["mcp", "tasks", "--root", "{root}", "--transport", "http"], "needs --token-file"),
        (
            ["mcp", "tasks", "--root", "{root}", "--transport", "http", "--token-file", "{root}/bad"],
            "bad:1: expected",
        ),
        (["mcp", "fs", "--root", "{root}", "--nats", "nats://127.0.0.1:4222"], "tasks server only"),
    ],
    ids=[
        "server",
        "root",
        "scope",
        "transport",
        "no-token-file",
        "missing-token-file",
        "bad-token-line",
        "audit-file",
        "tasks-root",
        "tasks-no-token-file",
        "tasks-bad-token-line",
        "nats-for-a-tool-server",
    ],
)
@pytest.mark.slow
def test_bad_input_is_refused_with_a_clear_message(tmp_path: Path, args: list[str], message: str) -> None:
    """Brief CLI conventions: the message says what was wrong; exit code non-zero; no traceback."""
    (tmp_path / "bad").write_text("only-a-token\n")
    result = _run(*(a.replace("{root}", str(tmp_path)) for a in args))
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_http_port_in_use_is_reported_without_a_traceback(tmp_path: Path, token_file: Path) -> None:
    """Brief CLI conventions: a port that cannot be bound is an error message, not a crash."""
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _run(
            "mcp",
            "fs",
            "--root",
            str(tmp_path),
            "--transport",
            "http",
            "--port",
            str(port),
            "--token-file",
            str(token_file),
        )
    assert result.returncode != 0
    assert "cannot serve on" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_without_scopes_a_server_grants_read_only_and_says_so_on_stderr(tmp_path: Path) -> None:
    """Least privilege by default: no --scopes means read, said on stderr (stdout is the protocol)."""
    result = _run("mcp", "fs", "--root", str(tmp_path))  # stdin closed: the stdio server ends at once
    assert result.returncode == 0, result.stderr
    assert "granted read (the default; grant more with --scopes read,write,execute)" in result.stderr
    assert result.stdout == ""


@pytest.mark.anyio
@pytest.mark.slow
async def test_without_scopes_only_read_tools_are_listed(repo: Path) -> None:
    """The default grant as a client sees it: no write tool is listed."""
    import anyio
    from mcp import Client

    from tests.tool_servers.ts_helpers import stdio_params

    with anyio.fail_after(30):
        async with Client(stdio_params("fs", repo)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
    assert names == {"list_files", "read_file"}
