"""The shared tool protocol: conformance of every server, typed errors, trace ids, validation first."""

# The tests drive each step to the state they assert and then read its fields: a None there fails
# the test as an assert would, so the checker's Optional rules are off in this file.
# pyright: reportOptionalMemberAccess=false, reportOptionalSubscript=false, reportOptionalOperand=false

from pathlib import Path

import anyio
import pytest
from mcp import Client
from pydantic import BaseModel, ConfigDict

from tests.tool_servers.ts_conformance import assert_valid, check_server_conformance
from tool_servers.exec.server import build_exec_server
from tool_servers.fs.server import build_fs_server
from tool_servers.git.server import build_git_server
from tool_servers.protocol.errors import TRACE_META_KEY, Conflict
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.sdk import build_server
from tool_servers.protocol.spec import CallContext, ServerOptions, ToolSpec
from tool_servers.search.server import build_search_server

pytestmark = pytest.mark.anyio

SERVERS = {
    "fs": build_fs_server,
    "git": build_git_server,
    "exec": build_exec_server,
    # Building it loads no model: the index opens on the first call that needs it.
    "search": build_search_server,
}


@pytest.mark.parametrize("name", sorted(SERVERS))
async def test_every_server_passes_the_conformance_check(name: str, repo: Path) -> None:
    """docs/tool-protocol.md: schemas, annotations, scope and risk on every tool; grants respected."""
    await check_server_conformance(SERVERS[name], repo)


async def test_every_read_tool_result_validates_against_its_output_schema(repo: Path) -> None:
    """Structured content validates against the declared output schema."""
    calls = {
        "fs": [("list_files", {}), ("read_file", {"path": "src/app.py", "start_line": 2})],
        "git": [
            ("git_status", {}),
            ("git_diff", {}),
            ("git_log", {}),
            ("git_show", {}),
            ("git_show", {"path": "README.md"}),
            ("git_blame", {"path": "src/app.py"}),
        ],
    }
    for server, server_calls in calls.items():
        with anyio.fail_after(20):
            async with Client(SERVERS[server](repo)) as client:
                schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
                for tool, args in server_calls:
                    result = await client.call_tool(tool, args)
                    assert not result.is_error, (tool, result.content)
                    assert_valid(result.structured_content, schemas[tool])


async def test_every_result_carries_a_trace_id_and_a_client_may_choose_it(repo: Path) -> None:
    """Our protocol: `_meta["codeloop/trace_id"]` on success and error results; a valid id sent in `_meta` is kept."""
    with anyio.fail_after(10):
        async with Client(build_fs_server(repo)) as client:
            ok = await client.call_tool("read_file", {"path": "README.md"})
            failed = await client.call_tool("read_file", {"path": "missing.txt"})
            chosen = await client.call_tool(
                "read_file", {"path": "README.md"}, meta={TRACE_META_KEY: "trace-42"}
            )
    assert len(ok.meta[TRACE_META_KEY]) == 32
    assert failed.meta[TRACE_META_KEY] == failed.structured_content["trace_id"]
    assert ok.meta[TRACE_META_KEY] != failed.meta[TRACE_META_KEY]
    assert chosen.meta[TRACE_META_KEY] == "trace-42"


async def test_invalid_arguments_are_a_typed_error_naming_each_field(repo: Path) -> None:
    """Arguments are validated before any effect; the error body lists what was wrong."""
    with anyio.fail_after(10):
        async with Client(build_fs_server(repo)) as client:
            result = await client.call_tool("write_file", {"path": "new.txt", "content": 7, "mode": "x"})
    assert result.is_error
    body = result.structured_content
    assert body["type"] == "invalid_arguments"
    assert {e["field"] for e in body["details"]["errors"]} == {"content", "mode"}
    assert not (repo / "new.txt").exists()


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str


class _Out(BaseModel):
    value: int


async def _raising(args: _Args, call: CallContext) -> _Out:
    if args.kind == "conflict":
        raise Conflict("the thing moved", where="here")
    raise RuntimeError("secret internal detail")


async def test_handler_errors_become_typed_results_and_crashes_hide_their_detail(tmp_path: Path) -> None:
    """Our protocol: a ToolServerError keeps type and details; any other exception is internal_error without its text."""
    spec = ToolSpec(
        name="boom", description="d", scope=Scope.READ, input_model=_Args, output_model=_Out, handler=_raising
    )
    with anyio.fail_after(10):
        async with Client(build_server("test", [spec], ServerOptions())) as client:
            conflict = await client.call_tool("boom", {"kind": "conflict"})
            crash = await client.call_tool("boom", {"kind": "crash"})
    assert conflict.structured_content["type"] == "conflict"
    assert conflict.structured_content["details"] == {"where": "here"}
    assert crash.structured_content["type"] == "internal_error"
    assert "secret internal detail" not in crash.content[0].text  # pyright: ignore[reportAttributeAccessIssue] - a tool server's error result is text content


async def test_unknown_tool_is_a_not_found_result(repo: Path) -> None:
    """MCP spec: calling a tool that does not exist is a tool error; ours is typed `not_found`."""
    with anyio.fail_after(10):
        async with Client(build_fs_server(repo)) as client:
            result = await client.call_tool("rm_rf", {})
    assert result.is_error
    assert (
        result.structured_content["type"] == "not_found"
        and result.structured_content["details"]["tool"] == "rm_rf"
    )
