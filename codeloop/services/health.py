"""Liveness and readiness over HTTP for the long-running processes (`serve`, `mcp --transport http`).

`GET /healthz` answers 200 while the process's event loop runs: the server is a task on that
loop, not a thread, so a loop that is stuck (a blocking call, a deadlock) stops answering and an
orchestrator such as Kubernetes restarts the process. `GET /readyz` answers 200 only when every
readiness check passes (for `serve`: its actors started and its NATS connection is up; for a tool
server: it listens), else 503 with the failing checks named, so traffic and scaling wait for it.
Both bodies are JSON, served by the HTTP app the metrics use too (`codeloop.services.http_app`).
The endpoint is off unless a port is given (`--health-port`): it tells nothing secret, but an
open port is still something to ask for.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskStatus

from codeloop.services.http_app import Request, Response, Route, json_response, serve_http_app

LIVE_PATH = "/healthz"
READY_PATH = "/readyz"


@dataclass
class Readiness:
    """Named checks; the process is ready when there is at least one and every one passes.

    A check is added by the part that knows (the composition root once its actors run); until
    then the process is live but not ready.
    """

    checks: dict[str, Callable[[], bool]] = field(default_factory=dict)

    def add(self, name: str, check: Callable[[], bool]) -> None:
        self.checks[name] = check

    def mark(self, name: str) -> None:
        """A check that passes from now on (e.g. "listening")."""
        self.checks[name] = lambda: True

    def state(self) -> tuple[bool, dict[str, bool]]:
        results = {name: _passes(check) for name, check in self.checks.items()}
        return bool(results) and all(results.values()), results


def _passes(check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except Exception:  # a check that cannot tell is not a pass
        return False


def health_routes(readiness: Readiness) -> dict[str, Route]:
    """`/healthz` (200 while the loop runs) and `/readyz` (200 when ready, else 503 naming the failing checks)."""

    def ready(_: Request) -> Response:
        is_ready, checks = readiness.state()
        body = {"status": "ready" if is_ready else "not ready", "checks": checks}
        return json_response(200 if is_ready else 503, body)

    return {LIVE_PATH: lambda _: json_response(200, {"status": "ok"}), READY_PATH: ready}


async def serve_health(
    readiness: Readiness,
    *,
    host: str = "127.0.0.1",
    port: int,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Answer `/healthz` and `/readyz` on `host:port` until cancelled; `task_status.started(base URL)`.

    Raises:
        OSError: the port could not be bound.
    """
    await serve_http_app(health_routes(readiness), host=host, port=port, task_status=task_status)


__all__ = ["LIVE_PATH", "READY_PATH", "Readiness", "health_routes", "serve_health"]
