"""The user's MCP servers behind codeloop's gate: a real tiny MCP server (made in `tiny_server.py`,
started over stdio as a user's server is) reached through its relay with a real MCP client."""

import functools
import json
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from tests.processes import processes_mentioning
from tests.tool_servers.relay.tiny_server import PLANTED
from tests.tool_servers.ts_helpers import Elicitor
from tool_servers.protocol.audit import AuditLog, verify_log
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.relay.server import open_relays
from tool_servers.relay.upstream import UpstreamSpec

pytestmark = pytest.mark.anyio
WRITE = frozenset({Scope.READ, Scope.WRITE})


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """The tiny server's script, copied under the test's directory (so a leftover process shows)."""
    script = tmp_path / "tiny_server.py"
    shutil.copy(Path(__file__).with_name("tiny_server.py"), script)
    return script


@pytest.fixture(autouse=True)
def no_server_left_behind(tmp_path: Path):
    yield
    assert processes_mentioning(tmp_path) == []


def spec(script: Path, name: str = "tiny", **overrides: Any) -> UpstreamSpec:
    fields: dict[str, Any] = {
        "name": name,
        "command": sys.executable,
        "args": (str(script),),
        "scope": Scope.WRITE,
        "confirm": "never",
        "timeout_s": 20.0,
    }
    return UpstreamSpec(**(fields | overrides))


@asynccontextmanager
async def relays(
    tmp_path: Path, *specs: UpstreamSpec, scopes: frozenset[Scope] = WRITE
) -> AsyncIterator[dict[str, MCPServer[object]]]:
    audit = AuditLog(tmp_path / "home" / "user-mcp-audit.jsonl")
    options = ServerOptions(scopes=scopes, principal="agent", audit=audit)
    async with open_relays(list(specs), options, cwd=tmp_path, log_dir=tmp_path / "home" / "logs") as opened:
        yield opened


def text(result: Any) -> str:
    return result.content[0].text


async def test_tools_are_offered_as_server__tool_with_their_own_schemas(tmp_path: Path, tiny: Path) -> None:
    """Our contract: a user's tools are `NAME__TOOL`, with the server's own input schema."""
    with anyio.fail_after(60):
        async with relays(tmp_path, spec(tiny)) as opened, Client(opened["tiny"]) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            result = await client.call_tool("tiny__echo", {"text": "hi", "times": 2})
    assert set(tools) == {f"tiny__{t}" for t in ("echo", "leak", "fail", "slow", "die", "env")}
    echo = tools["tiny__echo"].input_schema
    assert echo["required"] == ["text"] and set(echo["properties"]) == {"text", "times"}
    assert not result.is_error and json.loads(text(result))["text"] == "hi hi"


async def test_a_server_the_grant_does_not_cover_is_not_started(tmp_path: Path, tiny: Path) -> None:
    """Our contract: `scope` says which modes offer a server; a read grant starts no write server."""
    with anyio.fail_after(60):
        async with relays(
            tmp_path, spec(tiny), spec(tiny, "docs", scope=Scope.READ), scopes=frozenset({Scope.READ})
        ) as opened:
            assert set(opened) == {"docs"}
            assert len([p for p in processes_mentioning(tmp_path)]) == 1


async def test_a_configured_tool_asks_a_person_and_nothing_is_approved_by_default(
    tmp_path: Path, tiny: Path
) -> None:
    """Our rule: a call the configuration names asks first; a client that cannot ask gets
    `needs_confirmation` and nothing runs; a person's no is `permission_denied`."""
    asking = spec(tiny, confirm=frozenset({"env"}))
    yes, no = Elicitor("accept", approve=True), Elicitor("decline", approve=False)
    with anyio.fail_after(60):
        async with relays(tmp_path, asking) as opened:
            async with Client(opened["tiny"]) as mute:
                unasked = await mute.call_tool("tiny__env", {"name": "HOME"})
                free = await mute.call_tool("tiny__echo", {"text": "ok"})
            async with Client(opened["tiny"], elicitation_callback=yes) as client:
                approved = await client.call_tool("tiny__env", {"name": "HOME"})
            async with Client(opened["tiny"], elicitation_callback=no) as client:
                declined = await client.call_tool("tiny__env", {"name": "HOME"})
    assert unasked.is_error and text(unasked).startswith("needs_confirmation")
    assert not free.is_error
    assert not approved.is_error and "tiny" in yes.questions[0] and "env" in yes.questions[0]
    assert declined.is_error and text(declined).startswith("permission_denied")


async def test_a_server_that_does_not_say_read_asks_for_every_call(tmp_path: Path, tiny: Path) -> None:
    """The issue's default: every call of a server not declared `read` asks."""
    with anyio.fail_after(60):
        async with relays(tmp_path, spec(tiny, confirm="always")) as opened, Client(opened["tiny"]) as mute:
            result = await mute.call_tool("tiny__echo", {"text": "hi"})
    assert result.is_error and text(result).startswith("needs_confirmation")


async def test_every_call_is_in_the_audit_log_with_its_outcome(tmp_path: Path, tiny: Path) -> None:
    """Our tool protocol: each call has an audit record (redacted arguments, outcome) in a chained log."""
    with anyio.fail_after(60):
        async with relays(tmp_path, spec(tiny)) as opened, Client(opened["tiny"]) as client:
            await client.call_tool("tiny__echo", {"text": "hi"})
            await client.call_tool("tiny__fail", {})
            await client.call_tool("tiny__echo", {"text": "x", "api_key": PLANTED})
    log = tmp_path / "home" / "user-mcp-audit.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["server"], r["tool"], r["outcome"]) for r in records] == [
        ("tiny", "tiny__echo", "ok"),
        ("tiny", "tiny__fail", "tool_error"),
        ("tiny", "tiny__echo", "ok"),
    ]
    assert PLANTED not in log.read_text()
    assert verify_log(log).ok


async def test_a_secret_in_a_tools_output_is_redacted(tmp_path: Path, tiny: Path) -> None:
    """Our rule: secrets never reach events, traces or recordings; the relay redacts at the source."""
    with anyio.fail_after(60):
        async with relays(tmp_path, spec(tiny)) as opened, Client(opened["tiny"]) as client:
            result = await client.call_tool("tiny__leak", {})
    assert not result.is_error
    assert PLANTED not in json.dumps(result.model_dump(mode="json"))
    assert "region=eu" in text(result)


async def test_a_server_that_dies_mid_call_gives_tool_errors_and_the_others_go_on(
    tmp_path: Path, tiny: Path
) -> None:
    """The issue: a server killed mid-task is a tool error, never a crash."""
    with anyio.fail_after(60):
        async with relays(tmp_path, spec(tiny), spec(tiny, "other")) as opened:
            async with Client(opened["tiny"]) as client, Client(opened["other"]) as other:
                died = await client.call_tool("tiny__die", {})
                after = await client.call_tool("tiny__echo", {"text": "still there?"})
                alive = await other.call_tool("other__echo", {"text": "yes"})
    assert died.is_error and text(died).startswith("unavailable") and "tiny" in text(died)
    assert after.is_error and text(after).startswith("unavailable")
    assert not alive.is_error


async def test_a_server_that_cannot_start_offers_no_tools_and_breaks_nothing(tmp_path: Path) -> None:
    """A missing program, or a `${VAR}` that is not set, leaves that server out; the session goes on."""
    missing = UpstreamSpec(name="gone", command=str(tmp_path / "no-such-program"), scope=Scope.WRITE)
    unset = UpstreamSpec(
        name="keyed", command=sys.executable, env={"KEY": "${CODELOOP_TEST_SURELY_UNSET}"}, scope=Scope.WRITE
    )
    with anyio.fail_after(60):
        async with relays(tmp_path, missing, unset) as opened:
            for name in ("gone", "keyed"):
                async with Client(opened[name]) as client:
                    assert (await client.list_tools()).tools == []


@pytest.mark.slow
async def test_a_slow_call_times_out_and_long_output_is_cut(tmp_path: Path, tiny: Path) -> None:
    """Our rule: each call has a deadline and an output cap, both said in the result."""
    with anyio.fail_after(60):
        async with relays(tmp_path, spec(tiny, timeout_s=1.0, max_output_chars=100)) as opened:
            async with Client(opened["tiny"]) as client:
                slow = await client.call_tool("tiny__slow", {"seconds": 5})
                long = await client.call_tool("tiny__echo", {"text": "word", "times": 200})
    assert slow.is_error and text(slow).startswith("timeout")
    body = json.loads(text(long))
    assert body["truncated"] and "cut at 100 characters" in body["text"]


async def test_variables_in_env_are_expanded_where_the_server_starts(
    tmp_path: Path, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${VAR}` in `env` comes from the environment of the process starting the server."""
    monkeypatch.setenv("CODELOOP_TEST_DB", "postgres://db.local/app")
    with anyio.fail_after(60):
        async with relays(tmp_path, spec(tiny, env={"DATABASE": "${CODELOOP_TEST_DB}"})) as opened:
            async with Client(opened["tiny"]) as client:
                result = await client.call_tool("tiny__env", {"name": "DATABASE"})
    assert json.loads(text(result))["text"] == "postgres://db.local/app"


async def test_a_streamable_http_server_is_reached_with_headers_from_the_environment(
    tmp_path: Path, repo: Path, token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`url` and `headers` (`${VAR}` from the environment): a real Streamable HTTP server with
    bearer tokens answers through its relay; with a wrong token it is unavailable, not a crash."""
    from tool_servers.fs.server import build_fs_server
    from tool_servers.protocol.http import TokenTable, serve_http

    monkeypatch.setenv("CODELOOP_TEST_DOCS_TOKEN", "reader-token-7f3a9c21")
    upstream = build_fs_server(repo, ServerOptions(token_verifier=TokenTable.from_file(token_file)))
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            url = await tg.start(functools.partial(serve_http, upstream, port=0))
            good = UpstreamSpec(
                name="docs",
                url=url,
                headers={"Authorization": "Bearer ${CODELOOP_TEST_DOCS_TOKEN}"},
                scope=Scope.READ,
                confirm="never",
            )
            bad = UpstreamSpec(
                name="nope", url=url, headers={"Authorization": "Bearer wrong"}, scope=Scope.READ
            )
            async with relays(tmp_path, good, bad) as opened:
                async with Client(opened["docs"]) as client:
                    read = await client.call_tool("docs__read_file", {"path": "README.md"})
                async with Client(opened["nope"]) as client:
                    refused = (await client.list_tools()).tools
            tg.cancel_scope.cancel()
    assert not read.is_error, text(read)
    assert "# demo" in json.loads(text(read))["text"]
    assert refused == []
