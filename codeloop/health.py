"""Liveness and readiness over HTTP for the long-running processes (`serve`, `mcp --transport http`).

`GET /healthz` answers 200 while the process's event loop runs: the server is a task on that
loop, not a thread, so a loop that is stuck (a blocking call, a deadlock) stops answering and an
orchestrator such as Kubernetes restarts the process. `GET /readyz` answers 200 only when every
readiness check passes (for `serve`: its actors started and its NATS connection is up; for a tool
server: it listens), else 503 with the failing checks named, so traffic and scaling wait for it.
Both bodies are JSON. The endpoint is off unless a port is given (`--health-port`): it tells
nothing secret, but an open port is still something to ask for.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskStatus

LIVE_PATH = "/healthz"
READY_PATH = "/readyz"
_MAX_REQUEST = 8192
_READ_TIMEOUT_S = 5.0


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
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    async with listener:
        bound = listener.extra(SocketAttribute.local_port)
        shown = f"[{host}]" if ":" in host else host
        task_status.started(f"http://{shown}:{bound}")
        await listener.serve(lambda stream: _answer(stream, readiness))


async def _answer(stream: SocketStream, readiness: Readiness) -> None:
    async with stream:
        request = b""
        with anyio.move_on_after(_READ_TIMEOUT_S):
            while b"\r\n\r\n" not in request and len(request) < _MAX_REQUEST:
                try:
                    request += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        try:
            method, target = request.split(b"\r\n", 1)[0].decode("ascii").split(" ")[:2]
        except (UnicodeDecodeError, ValueError):
            await _send(stream, 400, {"error": "not an HTTP request"}, head=False)
            return
        path = target.split("?", 1)[0]
        head = method == "HEAD"
        if method not in ("GET", "HEAD"):
            await _send(stream, 405, {"error": f"{method} not allowed; use GET"}, head=head)
        elif path == LIVE_PATH:
            await _send(stream, 200, {"status": "ok"}, head=head)
        elif path == READY_PATH:
            ready, checks = readiness.state()
            body = {"status": "ready" if ready else "not ready", "checks": checks}
            await _send(stream, 200 if ready else 503, body, head=head)
        else:
            await _send(stream, 404, {"error": f"no {path}; try {LIVE_PATH} or {READY_PATH}"}, head=head)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


async def _send(stream: SocketStream, status: int, body: dict, *, head: bool) -> None:
    data = json.dumps(body).encode()
    header = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode()
    try:
        await stream.send(header if head else header + data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the prober hung up: nothing to tell it


__all__ = ["LIVE_PATH", "READY_PATH", "Readiness", "serve_health"]
