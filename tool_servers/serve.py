"""Run one tool server by name over stdio or streamable HTTP.

`SERVERS` maps a server name to `"module:function"`; the function has the signature
`build(root: Path, options: ServerOptions) -> MCPServer` (see `fs.server.build_fs_server`). Adding a
server is one module plus one line here. Modules are imported on demand, so serving `fs` never
imports the embedding model behind `search`.
"""

import functools
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
from mcp.server.mcpserver import MCPServer

from sandbox.environments.settings import EnvironmentSettings
from sandbox.limits import SandboxLimits
from tool_servers.protocol.audit import AuditLog, AuditSink
from tool_servers.protocol.http import TokenTable, serve_http
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.secret_files import DEFAULT_RULES, SecretRules

SERVERS: dict[str, str] = {
    "fs": "tool_servers.fs.server:build_fs_server",
    "git": "tool_servers.git.server:build_git_server",
    "search": "tool_servers.search.server:build_search_server",
    "exec": "tool_servers.exec.server:build_exec_server",
}
Transport = Literal["stdio", "http"]


class UnknownServer(LookupError):
    """No server has this name (or its module is not installed yet)."""


@dataclass(frozen=True)
class ServeConfig:
    """Everything `codeloop mcp` reads from its command line."""

    server: str
    root: Path
    audit_log: Path
    """Where every call is recorded. Not under the root: a read grant writes nothing there."""
    scopes: frozenset[Scope] = frozenset({Scope.READ})
    """Least privilege: read unless more is granted."""
    transport: Transport = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    token_file: Path | None = None
    index_dir: Path | str | None = None
    """Where `search` keeps the root's index (a directory or LanceDB URI); ignored by the others."""
    secrets: SecretRules = DEFAULT_RULES
    """Files no tool reads, lists, shows or indexes."""
    sandbox_policy: str = "auto"
    """The deployment's CODELOOP_SANDBOX (gvisor|process|auto) for `exec`; parsed when it opens its sandbox."""
    cache_root: Path | None = None
    """codeloop's cache directory (CODELOOP_CACHE_DIR) for `search`'s model; None: the platform's."""
    environment: EnvironmentSettings | None = None
    """How `exec` and `search` find and build the root's project environment: the composition
    root's settings (its cache, the `[environment]` of the configuration); the server reads no
    configuration file itself. None: detected, cached under `cache_root`."""
    limits: SandboxLimits | None = None
    """The limits of every command `exec` runs (the composition root's `[sandbox]`); None: the defaults."""


def server_builder(name: str) -> Callable[..., MCPServer[object]]:
    """The build function registered for `name`.

    Raises:
        UnknownServer: `name` is not registered or its module is missing.
    """
    target = SERVERS.get(name)
    if target is None:
        raise UnknownServer(f"unknown server {name!r}; choose one of: {', '.join(sorted(SERVERS))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UnknownServer(
                f"server {name!r} is not available in this build ({module_name} is missing)"
            ) from exc
        raise
    return getattr(module, attr)


def build_named_server(config: ServeConfig, *, sink: AuditSink | None = None) -> MCPServer[object]:
    """Build the configured server with its audit log and, over HTTP, its token table.

    Raises:
        UnknownServer: see `server_builder`.
        TokenFileError: the token file is unreadable or malformed.
    """
    build = server_builder(config.server)
    root = config.root.resolve()
    tokens = TokenTable.from_file(config.token_file) if config.token_file is not None else None
    options = ServerOptions(
        scopes=config.scopes,
        audit=AuditLog(config.audit_log, sink=sink),
        token_verifier=tokens,
        secrets=config.secrets,
    )
    return build(
        root,
        options,
        index_dir=config.index_dir,
        policy=config.sandbox_policy,
        cache_root=config.cache_root,
        environment=config.environment,
        limits=config.limits,
    )


async def run_server(
    config: ServeConfig, *, on_ready: Callable[[str], None] | None = None, sink: AuditSink | None = None
) -> None:
    """Serve until cancelled (HTTP) or until stdin closes (stdio); `on_ready(url)` once HTTP listens."""
    await serve_over(build_named_server(config, sink=sink), config, on_ready=on_ready)


async def serve_over(
    server: MCPServer[object], config: ServeConfig, *, on_ready: Callable[[str], None] | None = None
) -> None:
    """Serve an already built `server` over `config`'s transport (see `run_server`)."""
    if config.transport == "stdio":
        await server.run_stdio_async()
        return
    async with anyio.create_task_group() as tg:
        url = await tg.start(functools.partial(serve_http, server, host=config.host, port=config.port))
        (on_ready or _announce)(url)


def _announce(url: str) -> None:
    print(url, flush=True)
    print(f"serving at {url}", file=sys.stderr, flush=True)
