"""The conformance check every tool server passes (STYLE.md section 10), reusable for new servers.

`check_server_conformance(build, root)` builds the server once per scope set and checks:
every listed tool has an input schema and an output schema that are valid JSON Schema, MCP
annotations, and `_meta` naming its scope and risk; only tools within the granted scopes are
listed; and calling a tool outside them returns `permission_denied` naming the missing scope.
"""

from collections.abc import Callable, Mapping
from pathlib import Path

import anyio
from jsonschema.validators import validator_for
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import Tool
from pydantic import JsonValue

from tool_servers.protocol.scopes import ALL_SCOPES, Scope
from tool_servers.protocol.spec import ServerOptions

ServerBuild = Callable[[Path, ServerOptions], MCPServer[object]]
"""A server's build function (`tool_servers.serve`): its root and options."""

SCOPE_SETS = [frozenset(), frozenset({Scope.READ}), frozenset({Scope.READ, Scope.WRITE}), ALL_SCOPES]


def check_schema(schema: dict[str, object]) -> None:
    validator_for(schema).check_schema(schema)


def assert_valid(instance: JsonValue, schema: Mapping[str, object] | None) -> None:
    """`instance` validates against `schema` (raises jsonschema.ValidationError otherwise); a tool
    without an output schema fails here."""
    assert schema is not None, "the tool declares no output schema"
    validator_for(schema)(schema).validate(instance)


async def list_tools_by_scope(build: "ServerBuild", root: Path) -> dict[frozenset[Scope], dict[str, Tool]]:
    listed: dict[frozenset[Scope], dict[str, Tool]] = {}
    for scopes in SCOPE_SETS:
        with anyio.fail_after(10):
            async with Client(build(root, ServerOptions(scopes=scopes))) as client:
                listed[scopes] = {tool.name: tool for tool in (await client.list_tools()).tools}
    return listed


async def check_server_conformance(build: "ServerBuild", root: Path) -> None:
    listed = await list_tools_by_scope(build, root)
    everything = listed[ALL_SCOPES]
    assert everything, "a server with every scope granted lists no tool"
    for tool in everything.values():
        assert tool.description, tool.name
        assert tool.input_schema.get("type") == "object", tool.name
        check_schema(tool.input_schema)
        assert tool.output_schema is not None, f"{tool.name} has no output schema"
        check_schema(tool.output_schema)
        assert tool.annotations is not None and tool.annotations.read_only_hint is not None, tool.name
        assert tool.annotations.destructive_hint is not None, tool.name
        meta = tool.meta or {}
        assert meta.get("codeloop/scope") in {s.value for s in Scope}, tool.name
        assert meta.get("codeloop/risk") in {"low", "medium", "high"}, tool.name
        if tool.annotations.read_only_hint:
            assert meta["codeloop/scope"] == "read", (
                f"{tool.name} is read-only but needs {meta['codeloop/scope']}"
            )
    for scopes, tools in listed.items():
        expected = {
            name for name, tool in everything.items() if Scope((tool.meta or {})["codeloop/scope"]) in scopes
        }
        assert set(tools) == expected, f"scopes {sorted(scopes)} list {sorted(tools)}"
    # A tool outside the grant is refused by name of its scope, before its arguments are even looked at.
    for name, tool in everything.items():
        needed = Scope((tool.meta or {})["codeloop/scope"])
        granted = frozenset(s for s in Scope if s is not needed)
        with anyio.fail_after(10):
            async with Client(build(root, ServerOptions(scopes=granted))) as client:
                result = await client.call_tool(name, {})
        assert result.is_error, name
        assert result.structured_content["type"] == "permission_denied", name
        assert result.structured_content["details"]["missing_scope"] == needed.value
        assert needed.value in result.content[0].text  # pyright: ignore[reportAttributeAccessIssue] - a tool server's error result is text content
