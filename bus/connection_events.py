"""What nats-py reports asynchronously, logged for a person instead of dropped.

nats-py tells a client about trouble that is no call's answer through callbacks: `error_cb` for
a slow consumer (messages dropped because a subscription's pending limits were reached), a
permissions violation (the server refused a publish or subscribe, and nothing else says so), an
authorization error; `disconnected_cb`, `reconnected_cb` and `closed_cb` for the connection's
life. A closed connection's reason (an expired or revoked authentication, a server that stayed
away) is in `Client.last_error` when `closed_cb` runs.

Everything logged names the server as scheme, host and port only: a URL may carry a user and
password (`nats://user:secret@host`), which never reach a log. Errors of the first connect are
not logged: `open_bus` raises them (`BusClosed`, with the server's reason from `connect_error`).
"""

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypedDict
from urllib.parse import ParseResult, urlparse

import nats.errors
from nats.aio.client import Client

log = logging.getLogger("codeloop.bus")

SLOW_CONSUMER_LOG_EVERY_S = 10.0
"""nats-py reports every dropped message; one subscription is logged at most this often."""


def safe_url(url: ParseResult | str | None) -> str:
    """`scheme://host:port` of a server URL, without any user, password or token in it."""
    if not url:
        return ""
    parsed = urlparse(url) if isinstance(url, str) else url
    if not parsed.hostname:
        return parsed.scheme + "://" if parsed.scheme else ""
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme or 'nats'}://{parsed.hostname}{port}"


def server_refusal(exc: BaseException) -> str | None:
    """`"permissions"` or `"authorization"` when the server refused us, else None.

    nats-py raises `AuthorizationError` for an authorization violation but passes every other
    `-ERR` line of the server (permissions violations, "user authentication expired", "user
    authentication revoked") as a plain `nats.errors.Error` whose text is the server's, lower-cased
    by its parser; nats-py itself tells a permissions violation by that text. So does this, here
    and nowhere else.
    """
    if isinstance(exc, nats.errors.AuthorizationError):
        return "authorization"
    if type(exc) is not nats.errors.Error:
        return None
    text = str(exc).lower()
    if "permissions violation" in text:
        return "permissions"
    if "authorization violation" in text or "authentication" in text:
        return "authorization"
    return None


class ConnectionCallbacks(TypedDict):
    """The `nats.connect` options that report the connection's events."""

    error_cb: Callable[[Exception], Awaitable[None]]
    disconnected_cb: Callable[[], Awaitable[None]]
    reconnected_cb: Callable[[], Awaitable[None]]
    closed_cb: Callable[[], Awaitable[None]]


class ConnectionEvents:
    """The callbacks of one connection; `options()` are the `Client.connect` keyword arguments.

    Made before the connection (nats-py calls `error_cb` during the first connect) and attached
    to its `Client` with `attach` once that connect succeeded.
    """

    def __init__(self, urls: Sequence[str]) -> None:
        self.nc: Client | None = None
        self.closing = False
        """Set by the owner before it closes the connection: that close is not news."""
        self.connect_error: BaseException | None = None
        """The server's refusal during the first connect (bad credentials), for the raised error."""
        self._urls = [safe_url(u) for u in urls]
        self._last_url = ""
        self._slow: dict[int, tuple[float, int]] = {}
        self.refusals: list[str] = []
        """The server's permissions violations on this connection, newest last (at most 20), so a
        call that timed out can tell a refusal from a slow server (`bus.center`)."""

    def options(self) -> "ConnectionCallbacks":
        return {
            "error_cb": self.on_error,
            "disconnected_cb": self.on_disconnected,
            "reconnected_cb": self.on_reconnected,
            "closed_cb": self.on_closed,
        }

    def attach(self, nc: Client) -> None:
        self.nc = nc
        self._last_url = safe_url(nc.connected_url)

    @property
    def server(self) -> str:
        """The server we are (or were last) connected to, else the URLs we were given."""
        if self.nc is not None and self.nc.connected_url:
            self._last_url = safe_url(self.nc.connected_url)
        return self._last_url or ", ".join(self._urls)

    async def on_error(self, exc: Exception) -> None:
        refusal = server_refusal(exc)
        if self.nc is None:
            # The first connect (not attached yet; nats-py's own CONNECTING status is also set
            # during reconnects): `open_bus` raises what went wrong; remember a refusal for it.
            if refusal and self.connect_error is None:
                self.connect_error = exc
            log.debug("NATS connect attempt to %s failed: %r", self.server, exc)
            return
        if isinstance(exc, nats.errors.SlowConsumerError):
            self._slow_consumer(exc)
        elif refusal == "permissions":
            self.refusals = [*self.refusals[-19:], str(exc)]
            log.error(
                "NATS server %s refused an operation of this client: %s; the user this client "
                "connects as lacks the permission (check its publish/subscribe permissions)",
                self.server,
                exc,
            )
        elif refusal == "authorization":
            log.error(
                "NATS server %s refused this client's authorization: %s; check the credentials "
                "(--creds, --user/--password, --token) or renew them if they expired",
                self.server,
                exc,
            )
        elif isinstance(exc, (OSError, TimeoutError, nats.errors.StaleConnectionError)):
            # Reconnect attempts failing while the server is away: the reconnect logic acts on
            # them, and `on_disconnected` / `on_closed` tell the story once.
            log.debug("NATS reconnect attempt to %s failed: %r", self.server, exc)
        else:
            log.warning("NATS client error on %s: %s: %s", self.server, type(exc).__name__, exc)

    def _slow_consumer(self, exc: nats.errors.SlowConsumerError) -> None:
        now = time.monotonic()
        logged_at, dropped = self._slow.get(exc.sid, (0.0, 0))
        dropped += 1
        if logged_at and now - logged_at < SLOW_CONSUMER_LOG_EVERY_S:
            self._slow[exc.sid] = (logged_at, dropped)
            return
        self._slow[exc.sid] = (now, 0)
        log.warning(
            "slow consumer on %s: %d message(s) on %s dropped because its subscription's pending "
            "limits were reached; its handler cannot keep up (handle faster or raise the limits)",
            self.server,
            dropped,
            exc.subject,
        )

    async def on_disconnected(self) -> None:
        if self.nc is not None and not self.closing:
            log.warning("lost the connection to NATS at %s; reconnecting", self.server)

    async def on_reconnected(self) -> None:
        log.warning("reconnected to NATS at %s", self.server)

    async def on_closed(self) -> None:
        if self.nc is None or self.closing:
            return
        reason = self.nc.last_error
        refusal = server_refusal(reason) if reason is not None else None
        if refusal == "authorization":
            log.error(
                "NATS server %s closed the connection: %s; check or renew the credentials",
                self.server,
                reason,
            )
        else:
            log.error(
                "the connection to NATS at %s is closed for good%s",
                self.server,
                f": {reason}" if reason else "",
            )
