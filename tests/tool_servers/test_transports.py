"""Real server processes through the real MCP client: stdio and streamable HTTP with bearer tokens."""

import functools
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.tool_servers.ts_conformance import assert_valid
from tests.tool_servers.ts_helpers import Elicitor, http_client, http_server, stdio_params
from tool_servers.fs.server import build_fs_server
from tool_servers.protocol.http import TokenTable, serve_http
from tool_servers.protocol.spec import ServerOptions

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("server", ["fs", "git"])
@pytest.mark.slow
async def test_stdio_server_lists_tools_per_scope_and_answers_with_valid_structured_content(
    repo: Path, server: str, mode: str
) -> None:
    """Each server is a process over stdio, for current clients and the 2025-11-25 handshake."""
    call = ("read_file", {"path": "README.md"}) if server == "fs" else ("git_log", {})
    with anyio.fail_after(30):
        async with Client(stdio_params(server, repo, "--scopes", "read"), mode=mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            result = await client.call_tool(*call)
    assert {tool.meta["codeloop/scope"] for tool in tools.values()} == {"read"}  # pyright: ignore[reportOptionalSubscript] - every listed tool declares its scope in meta
    assert not result.is_error
    assert_valid(result.structured_content, tools[call[0]].output_schema)


async def test_http_without_a_token_or_with_a_wrong_one_gets_401(repo: Path, token_file: Path) -> None:
    """HTTP without a token, or with a wrong one, gets 401."""
    async with http_server("fs", repo, token_file) as url:
        assert url.endswith("/mcp")
        async with httpx2.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            missing = await http.post(url, json=body)
            wrong = await http.post(url, json=body, headers={"Authorization": "Bearer not-a-token"})
        # Through the MCP client the refusal arrives as an MCPError in exception groups, its status
        # gone: the client's own response hook sees the 401 (a timeout would escape as TimeoutError).
        statuses: list[int] = []

        async def seen(response: httpx2.Response) -> None:
            statuses.append(response.status_code)

        headers = {"Authorization": "Bearer not-a-token"}
        with anyio.fail_after(20), pytest.raises(Exception) as refused:
            async with httpx2.AsyncClient(headers=headers, event_hooks={"response": [seen]}) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    await client.list_tools()
        assert statuses and set(statuses) == {401}, (statuses, repr(refused.value))
    assert missing.status_code == 401 and wrong.status_code == 401
    assert "Bearer" in missing.headers["www-authenticate"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_tokens_map_to_principals_and_scopes(
    repo: Path, token_file: Path, tmp_path: Path, mode: str
) -> None:
    """A token's principal and scopes decide what it sees and may call; the audit log names the principal."""
    audit = tmp_path / "audit.jsonl"
    async with http_server(
        "fs", repo, token_file, "--audit-log", str(audit), "--scopes", "read,write"
    ) as url:
        with anyio.fail_after(30):
            async with http_client(url, "reader-token-7f3a9c21", mode=mode) as reader:
                reader_tools = {t.name for t in (await reader.list_tools()).tools}
                refused = await reader.call_tool("write_file", {"path": "a.txt", "content": "x"})
            async with http_client(url, "writer-token-4e8b2d65", mode=mode) as writer:
                writer_tools = {t.name for t in (await writer.list_tools()).tools}
                written = await writer.call_tool("write_file", {"path": "a.txt", "content": "x"})
    assert reader_tools == {"list_files", "read_file"}
    assert writer_tools == {"list_files", "read_file", "write_file", "apply_patch"}
    assert refused.structured_content["details"]["missing_scope"] == "write"
    assert "alice" in refused.structured_content["message"]
    assert not written.is_error and (repo / "a.txt").read_text() == "x"
    principals = [line.split('"principal":"')[1].split('"')[0] for line in audit.read_text().splitlines()]
    assert principals == ["alice", "bob"]


async def test_the_server_grant_caps_a_token_with_wider_scopes(repo: Path, token_file: Path) -> None:
    """A read,write token on a server started with --scopes read can only read."""
    async with http_server("fs", repo, token_file, "--scopes", "read") as url:
        with anyio.fail_after(20):
            async with http_client(url, "writer-token-4e8b2d65") as client:
                names = {t.name for t in (await client.list_tools()).tools}
    assert names == {"list_files", "read_file"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_elicitation_works_over_streamable_http(repo: Path, token_file: Path, mode: str) -> None:
    """Over HTTP: declined, cannot-elicit and accepted confirmation paths."""
    async with http_server("fs", repo, token_file, "--scopes", "read,write") as url:
        with anyio.fail_after(30):
            async with http_client(
                url, "writer-token-4e8b2d65", mode=mode, elicitation_callback=Elicitor("decline")
            ) as client:
                declined = await client.call_tool("write_file", {"path": ".env", "content": "A=1\n"})
            assert not (repo / ".env").exists()
            async with http_client(
                url, "writer-token-4e8b2d65", mode=mode, elicitation_callback=Elicitor("accept")
            ) as client:
                accepted = await client.call_tool("write_file", {"path": ".env", "content": "A=1\n"})
    assert declined.structured_content["type"] == "permission_denied"
    assert not accepted.is_error and (repo / ".env").read_text() == "A=1\n"


async def test_serve_http_runs_in_a_task_group_and_stops_on_cancel(repo: Path, token_file: Path) -> None:
    """Our contract for `serve_http`: ready when `start` returns its URL; cancelling the group closes the port."""
    server = build_fs_server(repo, ServerOptions(token_verifier=TokenTable.from_file(token_file)))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            url = await tg.start(functools.partial(serve_http, server, port=0))
            async with http_client(url, "reader-token-7f3a9c21") as client:
                result = await client.call_tool("read_file", {"path": "README.md"})
            tg.cancel_scope.cancel()
        async with httpx2.AsyncClient() as http:
            with pytest.raises(httpx2.ConnectError):
                await http.post(url, json={})
    assert result.structured_content["content"] == "# demo\n"


async def test_the_default_audit_log_lives_in_the_home_not_under_the_root(repo: Path) -> None:
    """A read grant writes nothing under the root: the log is in CODELOOP_HOME/roots/<root>-<hash>/."""
    from codeloop.config.environment import root_home

    with anyio.fail_after(30):
        async with Client(stdio_params("git", repo)) as client:
            await client.call_tool("git_status", {})
            status = await client.call_tool("git_status", {})
    log = root_home(repo) / "audit.jsonl"
    assert log.read_text().count("\n") == 2 and log.stat().st_mode & 0o777 == 0o600
    assert not (repo / ".codeloop").exists()
    assert [e["path"] for e in status.structured_content["entries"]] == ["src/app.py"]
