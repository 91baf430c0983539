"""`open_bus()`: one NATS connection with its JetStream context, nats errors mapped to `bus.errors`.

Exceptions from nats-py are translated here (`nats_errors()`), the way httpx maps httpcore's at its
transport edge, so agents and the CLI only ever see `BusError` subclasses.
"""

import math
import ssl
from collections.abc import AsyncGenerator, Generator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass

import anyio
import nats
import nats.errors
import nats.js.errors
from anyio.streams.memory import MemoryObjectReceiveStream
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from bus.config import BusConfig, TlsConfig
from bus.connection_events import ConnectionCallbacks, ConnectionEvents
from bus.envelope import Envelope
from bus.errors import (
    BusClosed,
    BusError,
    BusNotFound,
    BusNotReady,
    BusTimeout,
    NoResponders,
    PayloadTooLarge,
    RecordConflict,
)
from bus.tracing import trace_headers

MSG_ID_HEADER = "Nats-Msg-Id"
_NO_SUITABLE_PEERS = 10005
"""JetStream's error code for "no suitable peers for placement"."""


@contextmanager
def nats_errors() -> Generator[None, None, None]:
    """Re-raise nats-py exceptions as `bus.errors`, most specific first, chained with `from`."""
    try:
        yield
    except nats.js.errors.KeyWrongLastSequenceError as exc:
        raise RecordConflict(str(exc) or "revision changed under us") from exc
    except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError) as exc:
        raise NoResponders(str(exc) or "no responders (is the stream created?)") from exc
    except nats.errors.MaxPayloadError as exc:
        raise PayloadTooLarge(f"{exc}: the message is larger than the server's max payload") from exc
    except nats.errors.TimeoutError as exc:
        raise BusTimeout(str(exc) or "timed out") from exc
    except (nats.errors.ConnectionClosedError, nats.errors.ConnectionDrainingError) as exc:
        raise BusClosed(str(exc) or "connection closed") from exc
    except nats.errors.NoServersError as exc:
        raise BusClosed(f"no NATS server reachable: {exc}") from exc
    except nats.js.errors.NotFoundError as exc:
        raise BusNotFound(f"{exc.description or 'not found'} (JetStream {exc.code})") from exc
    except nats.js.errors.APIError as exc:
        if not _not_ready(exc):
            raise BusError(f"{type(exc).__name__}: {exc}") from exc
        raise BusNotReady(f"JetStream is not ready: {exc.description or exc.code}") from exc
    except (nats.errors.Error, nats.js.errors.Error) as exc:
        raise BusError(f"{type(exc).__name__}: {exc}") from exc


def _not_ready(exc: nats.js.errors.APIError) -> bool:
    """True for the answers of a cluster still electing leaders or placing peers."""
    # Servers before error codes existed only say "peer" in the description.
    return exc.code == 503 or exc.err_code == _NO_SUITABLE_PEERS or "peer" in (exc.description or "")


@dataclass(frozen=True)
class Published:
    """What JetStream answered to a publish."""

    stream: str
    seq: int
    duplicate: bool
    """True when the stream already held a message with this id (deduplication window)."""


class Bus:
    """A connected client: core NATS, JetStream, and the config it was opened with.

    `nc` and `js` are the nats-py objects, for code inside `bus/` only; everything else goes through
    the methods here, `bus.actor` and `bus.records`.
    """

    def __init__(self, nc: Client, config: BusConfig, events: ConnectionEvents | None = None) -> None:
        self.nc = nc
        self.events = events or ConnectionEvents(list(config.servers))
        """The connection's asynchronous reports (permissions violations, reconnects)."""
        self.js: JetStreamContext = nc.jetstream(timeout=5)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **opts untyped
        self.config = config

    @property
    def connected(self) -> bool:
        """True while the connection is up (False while it reconnects, drains or after close)."""
        return self.nc.is_connected

    @property
    def connected_url(self) -> str:
        url = self.nc.connected_url
        return url.geturl() if url else ""

    async def publish(self, subject: str, envelope: Envelope, *, timeout_s: float | None = None) -> Published:
        """Publish an envelope to a stream and wait for the stream's ack; deduplicated on `envelope.id`.

        The current trace context goes along as W3C `traceparent`/`tracestate` headers
        (`bus.tracing`), so the handler's spans join the publisher's trace.

        Raises:
            NoResponders: no stream takes this subject.
            BusTimeout: the stream did not ack in time.
        """
        return await self.publish_bytes(
            subject,
            envelope.to_bytes(),
            headers={**trace_headers(), MSG_ID_HEADER: envelope.id},
            timeout_s=timeout_s,
        )

    async def publish_bytes(
        self,
        subject: str,
        data: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Published:
        """Publish raw bytes to a stream (other-language peers, tests of malformed input).

        Raises:
            PayloadTooLarge: `data` is over the server's max payload; nothing was sent.
        """
        if len(data) > self.nc.max_payload:
            raise PayloadTooLarge(
                f"a message of {len(data):,} bytes for {subject} is over this server's max payload "
                f"of {self.nc.max_payload:,} bytes; nothing was sent"
            )
        with nats_errors():
            ack = await self.js.publish(subject, data, timeout=timeout_s, headers=dict(headers or {}))
        return Published(stream=ack.stream, seq=ack.seq, duplicate=bool(ack.duplicate))

    async def kv(self, bucket: str) -> KeyValue:
        with nats_errors():
            return await self.js.key_value(bucket)


@asynccontextmanager
async def subscription(bus: "Bus", subject: str) -> AsyncGenerator[MemoryObjectReceiveStream[bytes], None]:
    """The data of every core-NATS message on `subject`, as `queue_subscription` gives them."""
    async with queue_subscription(bus, subject, "") as messages:
        yield messages


@asynccontextmanager
async def queue_subscription(
    bus: "Bus", subject: str, queue: str
) -> AsyncGenerator[MemoryObjectReceiveStream[bytes], None]:
    """The data of the core-NATS messages on `subject` that reach this member of the queue group
    `queue` (each message reaches one member; "": no group, every message), as a stream;
    subscribed (and flushed, so nothing published after entry is missed) on entry, unsubscribed
    on the way out."""
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)

    async def on_message(msg: Msg) -> None:
        send.send_nowait(msg.data)

    with nats_errors():
        sub = await bus.nc.subscribe(subject, queue=queue, cb=on_message)  # pyright: ignore[reportUnknownMemberType] - nats-py types its callback as a bare Callable
        await bus.nc.flush()
    try:
        async with receive:
            yield receive
    finally:
        with anyio.CancelScope(shield=True):
            if not bus.nc.is_closed:
                await sub.unsubscribe()


class _ConnectOptions(ConnectionCallbacks, total=False):
    """What `open_bus` gives `nats.connect` (whose options are untyped `**kwargs`)."""

    name: str
    connect_timeout: float
    reconnect_time_wait: float
    max_reconnect_attempts: int
    allow_reconnect: bool
    user: str | None
    password: str | None
    token: str | None
    user_credentials: str
    tls: ssl.SSLContext


def _ssl_context(tls: TlsConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
    if tls.cert_file:
        context.load_cert_chain(str(tls.cert_file), str(tls.key_file) if tls.key_file else None)
    return context


@asynccontextmanager
async def open_bus(config: BusConfig, *, servers: tuple[str, ...] | None = None) -> AsyncGenerator[Bus, None]:
    """Connect to `servers` (default `config.servers`), yield a `Bus`, close the connection on exit.

    On exit the connection is flushed and closed, not drained: a drain waits `drain_timeout` for
    every pull subscription whose last fetch timed out. Actors drain their
    own in-flight work before this point.

    Raises:
        BusClosed: no server could be reached.
    """
    urls = list(servers or config.servers)
    if not urls:
        raise BusClosed("no NATS URL given: pass --nats URL, set CODELOOP_NATS_URL, or run `codeloop serve`")

    events = ConnectionEvents(urls)
    options: _ConnectOptions = {
        "name": config.name,
        "connect_timeout": config.connect_timeout_s,
        "reconnect_time_wait": 1,
        # Few attempts for the first connect, so a wrong URL fails in seconds, not a minute;
        # raised to `reconnect_attempts` once connected (nats-py reads the option on each reconnect).
        "max_reconnect_attempts": 1,
        "allow_reconnect": True,
        # Slow consumers, permissions violations, lost and expired authorizations: logged.
        **events.options(),
        "user": config.user,
        "password": config.password,
        "token": config.token,
    }
    if config.creds_file:
        options["user_credentials"] = str(config.creds_file)
    if config.tls:
        options["tls"] = _ssl_context(config.tls)
    try:
        nc = await nats.connect(urls, **options)  # pyright: ignore[reportUnknownMemberType] - nats-py types its callbacks as bare Callables
    except (OSError, nats.errors.Error) as exc:
        # nats-py ends a refused connect with "no servers available"; the server's refusal
        # (a wrong password, expired credentials) is what a person can act on.
        reason = events.connect_error or exc
        raise BusClosed(
            # The URLs as given: the CLI redacts a password in them (and a person sees which one).
            f"cannot connect to NATS at {', '.join(urls)}: {str(reason) or type(reason).__name__}"
        ) from exc
    events.attach(nc)
    nc.options["max_reconnect_attempts"] = config.reconnect_attempts
    try:
        yield Bus(nc, config, events)
    finally:
        events.closing = True
        with anyio.CancelScope(shield=True):
            if not nc.is_closed:
                with suppress(Exception):  # a dead server must not stop us from closing
                    await nc.flush(timeout=2)
                with suppress(OSError):  # the connection broke as we closed it: closed anyway
                    await nc.close()
