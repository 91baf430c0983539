"""The user's MCP servers in `codeloop config show` and `config check`: each one, where it was
declared, and the tools it offers (it is started to list them, then stopped)."""

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from codeloop.cli.common import usage_error
from codeloop.config.errors import ConfigError

if TYPE_CHECKING:
    from agents.messages import McpServer


USER_FILE = "user file"


class ListedTools(TypedDict):
    """What starting one server showed: the names of its tools, or why it is unavailable."""

    tools: list[str] | None
    problem: str | None


class ServerEntry(ListedTools):
    """One server of `config show --json`'s `mcp_servers`: its settings, the names only of its
    `env` and `headers` (their values may be secrets), and what starting it showed."""

    name: str
    transport: str
    """`stdio` or `http`."""
    command: str | None
    args: list[str]
    url: str | None
    env: list[str]
    headers: list[str]
    scope: str
    confirm: str | list[str]
    """`always`, `never`, or the tools that ask first."""
    source: str
    """Where it was declared: the user file or the `--mcp-config` file."""


def configured(repo: Path, mcp_config: Path | None) -> "list[tuple[McpServer, str]]":
    """(server, where it was declared) of the user file's servers and `mcp_config`'s.

    Raises:
        typer.Exit: (2) the repository's configuration declares servers, or a file is malformed.
    """
    from codeloop.config.files import user_file
    from codeloop.config.mcp_servers import read_mcp_config, refuse_repository_servers, user_mcp_servers

    try:
        refuse_repository_servers(repo)
        found = {s.name: (s, str(user_file())) for s in user_mcp_servers()}
        if mcp_config is not None:
            found |= {s.name: (s, str(mcp_config)) for s in read_mcp_config(mcp_config)}
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    return list(found.values())


async def listed_tools(servers: "list[McpServer]") -> dict[str, ListedTools]:
    """Server name -> `{"tools": [names], "problem": why it is unavailable or None}`, each started
    in a temporary directory and stopped again."""

    import anyio

    from codeloop.wiring.user_servers import upstream_spec
    from tool_servers.relay.upstream import Upstream

    with tempfile.TemporaryDirectory(prefix="codeloop-mcp-") as where:
        upstreams = [Upstream(upstream_spec(s), cwd=Path(where)) for s in servers]
        async with anyio.create_task_group() as tg:
            async with anyio.create_task_group() as starting:
                for upstream in upstreams:
                    starting.start_soon(tg.start, upstream.run)
            for upstream in upstreams:
                upstream.stop()
    return {
        u.spec.name: ListedTools(
            tools=[t.name for t in u.tools],
            problem=None if u.tools or u.problem == "it stopped" else u.problem,
        )
        for u in upstreams
    }


def report(servers: "list[tuple[McpServer, str]]", tools: dict[str, ListedTools]) -> list[ServerEntry]:
    """The `mcp_servers` entries of `config show --json`: no `env` or `headers` values (they may
    hold secrets), only their names."""
    entries: list[ServerEntry] = []
    for server, where in servers:
        confirm = (
            server.confirm
            if server.confirm is not None
            else ("never" if server.scope == "read" else "always")
        )
        entries.append(
            {
                "name": server.name,
                "transport": "stdio" if server.command else "http",
                "command": server.command,
                "args": server.args,
                "url": server.url,
                "env": sorted(server.env),
                "headers": sorted(server.headers),
                "scope": server.scope,
                "confirm": confirm,
                "source": where,
                **tools.get(server.name, ListedTools(tools=None, problem=None)),
            }
        )
    return entries


def lines(entries: list[ServerEntry]) -> list[str]:
    """`config show`'s text for the servers."""
    if not entries:
        return []
    out = ["mcp servers:"]
    for e in entries:
        target = e["url"] or " ".join([e["command"] or "", *e["args"]])  # a server has one or the other
        out.append(
            f"  {e['name']}  ({e['transport']}: {target})  scope {e['scope']}, confirm {e['confirm']}  ({e['source']})"
        )
        if e["problem"]:
            out.append(f"    unavailable: {e['problem']}")
        elif e["tools"] is not None:
            out.append(f"    tools: {', '.join(e['name'] + '__' + t for t in e['tools']) or '(none)'}")
    return out
