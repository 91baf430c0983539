"""The tool servers the agents of this process use: in-process MCP servers per root and grant.

Agents see only `agents.tools.ToolProvider`; this is the one implementation the composition root
builds. Servers are built fresh for each request (a scratch workspace is a new root), in process
— the MCP session is real, without a subprocess or a socket — and share what is expensive: one
embedding model for every `search` server, loaded at its first use.
"""

import threading
from pathlib import Path
from typing import Any

from sandbox.limits import SandboxLimits
from tool_servers.protocol import ServerOptions
from tool_servers.scopes import Scope
from tool_servers.serve import server_builder

SERVER_NAMES = ("fs", "search", "git", "exec")


class _SharedEmbedder:
    """The bundled embedding model, loaded once on first use and shared by every search server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: Any = None

    def _model(self) -> Any:
        with self._lock:
            if self._loaded is None:
                from tool_servers.search.embed import load_embedder

                self._loaded = load_embedder()
            return self._loaded

    @property
    def name(self) -> str:
        return self._model().name

    @property
    def dimension(self) -> int:
        return self._model().dimension

    def embed(self, texts: list[str]) -> Any:
        return self._model().embed(texts)


class InProcessTools:
    """`ToolProvider` over in-process servers; `sandbox_backend` and `limits` go to `exec`."""

    def __init__(self, *, sandbox_backend: str = "auto", limits: SandboxLimits | None = None) -> None:
        self.sandbox_backend = sandbox_backend
        self.limits = limits
        self._embedder = _SharedEmbedder()

    def servers(self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None) -> dict[str, Any]:
        options = ServerOptions(scopes=frozenset(Scope(s) for s in scopes), principal="agent")
        extra: dict[str, dict[str, Any]] = {
            "search": {"index_dir": index_dir, "embedder": self._embedder},
            "exec": {"backend": self.sandbox_backend, "limits": self.limits},
        }
        return {name: server_builder(name)(root, options, **extra.get(name, {})) for name in SERVER_NAMES}
