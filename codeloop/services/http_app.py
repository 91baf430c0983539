"""The one small HTTP app behind the health endpoint and the Prometheus metrics: a few `GET` routes
served on an anyio listener.

Each listener answers the routes it is given (`/healthz` and `/readyz` on `--health-port`,
`/metrics` on `--metrics-port`), anything else with 404 naming them. It is a task on the
process's event loop, not a thread: a loop that is stuck (a blocking call, a deadlock) stops
answering, which is what a liveness probe must see. One request per connection
(`Connection: close`), `GET` and `HEAD` only; a request head larger than 8 KiB, or slower than
five seconds, is answered as it stands. Nothing here is secret, but an open port is still
something to ask for: the callers listen only when told to.
"""

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskStatus

MAX_REQUEST_BYTES = 8192
READ_TIMEOUT_S = 5.0
JSON = "application/json"


@dataclass(frozen=True)
class Request:
    """What a route sees of a request."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    """Header names in lower case."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = JSON


Route = Callable[[Request], Response]


def json_response(status: int, body: dict) -> Response:
    return Response(status, json.dumps(body).encode())


async def serve_http_app(
    routes: Mapping[str, Route],
    *,
    host: str = "127.0.0.1",
    port: int,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Answer `routes` (path -> route) on `host:port` until cancelled; `task_status.started(base URL)`
    (`http://HOST:PORT`, the bound port when `port` is 0).

    Raises:
        OSError: the port could not be bound.
    """
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    async with listener:
        bound = listener.extra(SocketAttribute.local_port)
        shown = f"[{host}]" if ":" in host else host
        task_status.started(f"http://{shown}:{bound}")
        await listener.serve(lambda stream: _answer(stream, routes))


async def _answer(stream: SocketStream, routes: Mapping[str, Route]) -> None:
    async with stream:
        head = b""
        with anyio.move_on_after(READ_TIMEOUT_S):
            while b"\r\n\r\n" not in head and len(head) < MAX_REQUEST_BYTES:
                try:
                    head += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        request = _parse(head)
        if request is None:
            await _send(stream, json_response(400, {"error": "not an HTTP request"}), head_only=False)
            return
        head_only = request.method == "HEAD"
        route = routes.get(request.path)
        if request.method not in ("GET", "HEAD"):
            response = json_response(405, {"error": f"{request.method} not allowed; use GET"})
        elif route is None:
            response = json_response(404, {"error": f"no {request.path}; try {' or '.join(routes)}"})
        else:
            response = route(request)
        await _send(stream, response, head_only=head_only)


def _parse(head: bytes) -> Request | None:
    try:
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        method, target = lines[0].split(" ")[:2]
        lines[0].encode("ascii")
    except (UnicodeEncodeError, ValueError):
        return None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return Request(method=method, path=target.split("?", 1)[0], headers=headers)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


async def _send(stream: SocketStream, response: Response, *, head_only: bool) -> None:
    header = (
        f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'OK')}\r\n"
        f"Content-Type: {response.content_type}\r\n"
        f"Content-Length: {len(response.body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    try:
        await stream.send(header if head_only else header + response.body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the client hung up: nothing to tell it


__all__ = ["Request", "Response", "Route", "json_response", "serve_http_app"]
