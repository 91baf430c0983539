"""The tool servers the agents of this process use: in-process MCP servers per root and grant.

Agents see only `agents.runtime.tools.ToolProvider`; this is the one implementation the composition root
builds. Servers are built fresh for each request (a scratch workspace is a new root), in process
— the MCP session is real, without a subprocess or a socket — and share what is expensive: one
embedding model for every `search` server, loaded at its first use. `StdioTools` runs some of
them as `codeloop mcp` subprocesses instead (`codeloop serve --tools-stdio fs,git`).
"""

import os
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeloop.config.environment import ToolServerConfig
from codeloop.config.project_environment import workspace_environment_settings
from codeloop.config.sandbox_limits import workspace_sandbox_limits, workspace_sandbox_policy
from layout import HOME_ENV
from sandbox.limits import SandboxLimits
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.serve import server_builder

if TYPE_CHECKING:  # the embedding module imports numpy and the model runtime: only a search needs it
    import numpy as np
    from fastmcp.client.transports import StdioTransport

    from tool_servers.search.embedding.embed import CachedEmbedder, Embedder

SERVER_NAMES = ("fs", "search", "git", "exec")


class _SharedEmbedder:
    """The bundled embedding model, loaded once on first use and shared by every search server."""

    def __init__(self, cache_root: Path | None = None) -> None:
        self.cache_root = cache_root
        self._lock = threading.Lock()
        self._loaded: CachedEmbedder | None = None

    def _model(self) -> "CachedEmbedder":
        with self._lock:
            if self._loaded is None:
                # Here, not at the top: it imports torch, which a process that never searches skips.
                from tool_servers.search.embedding.embed import load_embedder

                self._loaded = load_embedder(cache_root=self.cache_root)
            return self._loaded

    @property
    def name(self) -> str:
        return self._model().name

    @property
    def dimension(self) -> int:
        return self._model().dimension

    @property
    def inner(self) -> "Embedder":
        """The model without the cache in front, as `CachedEmbedder.inner`: the index embeds
        queries with it, so they never pile up in the shared cache (`CodeIndex.embed_queries`)."""
        return self._model().inner

    def embed(self, texts: list[str]) -> "np.ndarray":
        return self._model().embed(texts)


class InProcessTools:
    """`ToolProvider` over in-process servers; `sandbox_backend`, `limits` (default: each root's
    `[sandbox]` configuration) and `config`'s sandbox policy go to `exec`, `config`'s cache
    directory to the shared model."""

    def __init__(
        self,
        *,
        sandbox_backend: str = "auto",
        limits: SandboxLimits | None = None,
        config: ToolServerConfig | None = None,
    ) -> None:
        self.sandbox_backend = sandbox_backend
        self.limits = limits
        self.config = config or ToolServerConfig()
        self._embedder = _SharedEmbedder(self.config.cache_dir)

    def servers(
        self,
        root: Path,
        scopes: frozenset[str],
        *,
        index_dir: Path | None = None,
        options: ServerOptions | None = None,
    ) -> dict[str, Any]:
        """See `ToolProvider.servers`; `options` (the workspace service's: audit log and bearer
        tokens) replaces the default ones, its scopes then being `scopes`. `exec` and `search`
        find the project environment, and `exec` its sandbox limits, with the settings of `root`'s
        own configuration (a scratch workspace carries the repository's `codeloop.toml`) over this
        machine's user file."""
        grant = frozenset(Scope(s) for s in scopes)
        options = (
            replace(options, scopes=grant) if options else ServerOptions(scopes=grant, principal="agent")
        )
        environment = workspace_environment_settings(root, cache_root=self.config.cache_dir)
        policy = workspace_sandbox_policy(root, self.config.sandbox_policy)
        extra: dict[str, dict[str, object]] = {  # each builder's own keyword arguments
            "search": {
                "index_dir": index_dir,
                "embedder": self._embedder,
                "backend": self.sandbox_backend,
                "policy": policy,
                "environment": environment,
            },
            "exec": {
                "backend": self.sandbox_backend,
                "limits": self.limits or workspace_sandbox_limits(root),
                "policy": policy,
                "environment": environment,
            },
        }
        return {name: server_builder(name)(root, options, **extra.get(name, {})) for name in SERVER_NAMES}


STDIO_SERVERS = ("fs", "git")
"""Servers that may run in their own process: the ones only the coder's tool loop talks to, whose
client (pydantic-ai's `MCPToolset`) takes a stdio transport."""
_PASSED_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "TMPDIR",
    HOME_ENV,
    "CODELOOP_TRACE_FILE",
    "CODELOOP_TRACE_CONTENT",
)


class StdioTools(InProcessTools):
    """`ToolProvider` running the servers named in `stdio` as `codeloop mcp NAME --root ROOT`
    subprocesses over stdio (one per session, ended with it), the others in process.

    A server process gets only the environment it needs — no provider keys, no NATS credentials —
    plus the telemetry settings (`OTEL_*`, `CODELOOP_TRACE_*`), so its spans reach the same exporter (and its `tools/call`
    spans join the caller's trace through the context the mcp SDK puts in `_meta`). It writes its
    audit records to `audit_log`, outside the workspace it is confined to.
    """

    def __init__(
        self,
        *,
        stdio: frozenset[str],
        audit_log: Path,
        sandbox_backend: str = "auto",
        limits: SandboxLimits | None = None,
        config: ToolServerConfig | None = None,
    ) -> None:
        unknown = sorted(set(stdio) - set(STDIO_SERVERS))
        if unknown:
            raise ValueError(f"{unknown[0]!r} cannot run over stdio; choose from {', '.join(STDIO_SERVERS)}")
        super().__init__(sandbox_backend=sandbox_backend, limits=limits, config=config)
        self.stdio = frozenset(stdio)
        self.audit_log = audit_log

    def servers(self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None) -> dict[str, Any]:
        servers = super().servers(root, scopes, index_dir=index_dir)
        for name in self.stdio:
            servers[name] = self._transport(name, root, scopes)
        return servers

    def _transport(self, name: str, root: Path, scopes: frozenset[str]) -> "StdioTransport":
        # Here, not at the top: fastmcp's client is heavy, and only `--tools-stdio` needs it.
        from fastmcp.client.transports import StdioTransport

        env = {k: v for k, v in os.environ.items() if k in _PASSED_ENV or k.startswith("OTEL_")}
        args = [
            "-m",
            "codeloop",
            "mcp",
            name,
            "--root",
            str(root),
            "--scopes",
            ",".join(sorted(scopes)),
            "--audit-log",
            str(self.audit_log),
        ]
        return StdioTransport(sys.executable, args, env=env, cwd=str(root), keep_alive=False)
