"""The tool servers `codeloop serve` hosts over streamable HTTP, with a generated bearer token.

Each server of `tool_servers.serve.SERVERS` (fs, git, search, exec) and the tasks server (on
serve's own bus, `codeloop.services.tasks_backend`) runs in serve's task group on a free port of
`--mcp-host`, confined to `--mcp-root`, granted `--mcp-scopes` (read unless told otherwise: least
privilege; the grant bounds the mode of the tasks a client submits). One token, principal `serve`, with the same scopes, is written to a
0600 token file in the state directory and removed again when serve stops; a new token is made on
every start, so a leaked one dies with the process that issued it.

Building a server is cheap: `search` loads its model and index on the first call, `exec` starts
its sandbox on the first command. All servers append to one audit log in the state directory
(the log takes an exclusive lock per append) and hand each record to `sink` (the bus publisher);
`search` keeps the root's index in the state directory too (`codeloop.config.environment.root_home`), so
nothing is written under the root unless a granted call writes it.
"""

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import TaskStatus
from mcp.server.mcpserver import MCPServer

from bus.connection import Bus
from bus.credentials import write_private
from codeloop.config.environment import ToolServerConfig, root_home
from codeloop.config.project_environment import environment_settings
from codeloop.config.sandbox_limits import workspace_sandbox_limits, workspace_sandbox_policy
from codeloop.config.serve_note import McpNote
from codeloop.services.tasks_backend import BusTasks
from layout import INDEX_DIR, MCP_AUDIT, MCP_TOKENS
from tool_servers.protocol.audit import AuditLog, AuditSink
from tool_servers.protocol.http import TokenGrant, TokenTable, new_token, serve_http
from tool_servers.protocol.scopes import Scope, format_scopes
from tool_servers.protocol.spec import ServerOptions
from tool_servers.secret_files import DEFAULT_RULES, SecretRules
from tool_servers.serve import SERVERS, ServeConfig, UnknownServer, build_named_server
from tool_servers.tasks.server import build_tasks_server
from tool_servers.tasks.verify import PatchVerifier

# Named as before the services package existed: logging configurations and filters name it.
log = logging.getLogger("codeloop.hosted_mcp")
PRINCIPAL = "serve"
TASKS = "tasks"
HOSTED = (*SERVERS, TASKS)
"""Every server serve hosts by default: the tool servers and the tasks server."""


@dataclass(frozen=True)
class McpHosting:
    """What `codeloop serve --mcp-*` asks for."""

    root: Path
    scopes: frozenset[Scope] = frozenset({Scope.READ})
    host: str = "127.0.0.1"
    servers: Sequence[str] = field(default_factory=lambda: HOSTED)
    secrets: SecretRules = DEFAULT_RULES
    """Files the hosted servers never read, list or index."""
    verifier: PatchVerifier | None = None
    """The hosted tasks server's `verify_patch` judge (`codeloop.wiring.judge.patch_verifier`);
    None: that tool is not served."""


def write_token_file(state_dir: Path, scopes: frozenset[Scope]) -> tuple[Path, str]:
    """A fresh token for principal `serve` in `<state_dir>/mcp-tokens`, created 0600; (path, token)."""
    token = new_token()
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / MCP_TOKENS
    text = "# codeloop serve: TOKEN PRINCIPAL SCOPES (replaced at every start)\n"
    text += TokenTable({token: TokenGrant(PRINCIPAL, scopes)}).dump()
    # 0600 from the first byte, renamed over the old file: a reader sees the old token or the new one.
    write_private(path, text)
    return path, token


def _remove_if_ours(path: Path, token: str) -> None:
    # A newer serve may have replaced the file with its own token: leave that one alone.
    try:
        if token in path.read_text(encoding="utf-8"):
            path.unlink()
    except OSError:
        pass


async def host_tool_servers(
    hosting: McpHosting,
    *,
    state_dir: Path,
    sink: AuditSink | None = None,
    tool_config: ToolServerConfig | None = None,
    bus: Bus | None = None,
    task_status: TaskStatus[McpNote] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve every server of `hosting` over HTTP until cancelled; `task_status.started(McpNote)` once all listen.

    `tool_config` is the environment's sandbox policy and cache directory (default: neither set);
    `bus` is where the tasks server submits (without one it is not hosted).

    A server whose module is missing is skipped and named in `McpNote.unavailable`.

    The exec and search servers get the project environment settings of `hosting.root`
    (`codeloop.config.project_environment`).

    Raises:
        OSError: a server could not listen on `hosting.host`.
        ConfigError: the root's or the user's configuration file does not read.
    """
    tool_config = tool_config or ToolServerConfig()
    environment = environment_settings(hosting.root, cache_root=tool_config.cache_dir)
    limits = workspace_sandbox_limits(hosting.root)
    token_file, token = write_token_file(state_dir, hosting.scopes)
    audit_log = state_dir / MCP_AUDIT
    urls: dict[str, str] = {}
    unavailable: dict[str, str] = {}
    try:
        async with anyio.create_task_group() as tg:
            for name in hosting.servers:
                config = ServeConfig(
                    server=name,
                    root=hosting.root,
                    scopes=hosting.scopes,
                    transport="http",
                    host=hosting.host,
                    port=0,
                    token_file=token_file,
                    audit_log=audit_log,
                    index_dir=root_home(hosting.root, state_dir) / INDEX_DIR,
                    secrets=hosting.secrets,
                    sandbox_policy=workspace_sandbox_policy(hosting.root, tool_config.sandbox_policy),
                    cache_root=tool_config.cache_dir,
                    environment=environment,
                    limits=limits,
                )
                try:
                    if name == TASKS:
                        server = await _tasks_server(config, bus, sink, hosting.verifier)
                    else:
                        server = build_named_server(config, sink=sink)
                except UnknownServer as exc:
                    log.warning("not hosting the %s tool server: %s", name, exc)
                    unavailable[name] = str(exc)
                    continue
                urls[name] = await tg.start(functools.partial(serve_http, server, host=hosting.host, port=0))
            task_status.started(
                McpNote(
                    root=str(hosting.root),
                    scopes=format_scopes(hosting.scopes).split(","),
                    urls=urls,
                    token_file=str(token_file),
                    principal=PRINCIPAL,
                    audit_log=str(audit_log),
                    unavailable=unavailable,
                )
            )
    finally:
        _remove_if_ours(token_file, token)


async def _tasks_server(
    config: ServeConfig, bus: Bus | None, sink: AuditSink | None, verifier: PatchVerifier | None
) -> MCPServer[object]:
    if bus is None:
        raise UnknownServer("the tasks server needs serve's bus")
    options = ServerOptions(
        scopes=config.scopes,
        audit=AuditLog(config.audit_log, sink=sink),
        token_verifier=TokenTable.from_file(config.token_file) if config.token_file else None,
        secrets=config.secrets,
    )
    backend = await BusTasks.open(bus)
    return build_tasks_server(config.root.resolve(), options, backend, verifier=verifier)  # pyright: ignore[reportArgumentType] - BusTasks.changes is an async generator function, which the protocol's iterator describes


__all__ = ["HOSTED", "PRINCIPAL", "McpHosting", "host_tool_servers", "write_token_file"]
