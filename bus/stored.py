"""What a stream stores, read outside the actor runtime: a message by sequence or by subject, all
the messages of a subject so far, or a subject followed live.

Callers see `StoredMessage` and `bus.errors`, never nats-py's messages or subscriptions. A live
follow uses an ordered push consumer (ephemeral, flow-controlled, no acks) and survives a server
restart: after a reconnect it subscribes again after the last sequence it gave, because the
server's ephemeral consumers may be gone, so nothing is missed or given twice.
"""

from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import cast

import anyio
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bus.connection import Bus, nats_errors
from bus.errors import BusError


@dataclass(frozen=True)
class StoredMessage:
    """One message as its stream stores it."""

    subject: str
    data: bytes
    seq: int
    """Its sequence in the stream."""
    headers: Mapping[str, str] = field(default_factory=dict[str, str])


async def message_at(bus: Bus, stream: str, seq: int) -> StoredMessage:
    """The message `stream` stores at `seq`.

    Raises:
        BusNotFound: there is none (never was, or it was taken off a work queue or deleted).
    """
    with nats_errors():
        raw = await bus.js.get_msg(stream, seq)
    headers = raw.headers  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType] - nats-py types them as a bare Dict
    return StoredMessage(raw.subject or "", raw.data or b"", raw.seq or seq, _headers(headers))  # pyright: ignore[reportUnknownArgumentType] - as above


async def last_message(bus: Bus, stream: str, subject: str) -> StoredMessage:
    """The last message `stream` stores on `subject`.

    Raises:
        BusNotFound: none is stored on it.
    """
    with nats_errors():
        raw = await bus.js.get_last_msg(stream, subject)
    headers = raw.headers  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType] - nats-py types them as a bare Dict
    return StoredMessage(raw.subject or subject, raw.data or b"", raw.seq or 0, _headers(headers))  # pyright: ignore[reportUnknownArgumentType] - as above


async def delete_message(bus: Bus, stream: str, seq: int) -> None:
    """Remove the message at `seq` from `stream` (a work queue's message no worker will take)."""
    with nats_errors():
        await bus.js.delete_msg(stream, seq)


async def sequence_range(bus: Bus, stream: str) -> tuple[int, int]:
    """The first and the last sequence `stream` stores now ((0, 0) when empty)."""
    with nats_errors():
        info = await bus.js.stream_info(stream)
    return info.state.first_seq, info.state.last_seq


async def read_stored(bus: Bus, subject: str, *, quiet_s: float = 2.0) -> list[StoredMessage]:
    """Every message stored on `subject` (wildcards allowed) so far, in stream order; stored
    messages arrive at once, so `quiet_s` without one means there are no more."""
    found: list[StoredMessage] = []
    with nats_errors():
        sub = await bus.js.subscribe(subject, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
    try:
        while True:
            try:
                with nats_errors():
                    msg = await sub.next_msg(timeout=quiet_s)
            except TimeoutError:
                break
            metadata = msg.metadata  # parsed from the reply subject at every access: once
            found.append(
                StoredMessage(msg.subject, msg.data, metadata.sequence.stream, dict(msg.headers or {}))
            )
            if metadata.num_pending == 0:
                break
    finally:
        await _unsubscribe(bus, sub)
    return found


async def read_batch(
    bus: Bus, stream: str, subject: str, *, after: int = 0, timeout_s: float = 5.0
) -> list[StoredMessage]:
    """The messages `stream` stores on `subject` after sequence `after`, in stream order, read in
    one batch (headers left out).

    One ephemeral consumer pushes them all to a plain subscription whose callback only keeps the
    bytes: no per-message wait (a consumer's `next_msg` costs a task and a timer per message). The
    consumer's `num_pending` says at once when there is nothing to read, and each message's own
    pending count says when the last one arrived. Messages published meanwhile may come too,
    after those (the stream's order holds). Should the last one not come within `timeout_s`,
    those that came are returned: a caller reading on from the last one it got misses nothing.
    """
    got: list[StoredMessage] = []
    caught_up = anyio.Event()

    async def take(msg: Msg) -> None:
        metadata = msg.metadata  # parsed from the reply subject at every access: once
        got.append(StoredMessage(msg.subject, msg.data, int(metadata.sequence.stream)))
        if metadata.num_pending == 0:
            caught_up.set()

    consumer = ConsumerConfig(
        filter_subject=subject,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after else DeliverPolicy.ALL,
        opt_start_seq=after + 1 if after else None,
        ack_policy=AckPolicy.NONE,
        mem_storage=True,
        inactive_threshold=timeout_s,
    )
    with nats_errors():
        sub = await bus.nc.subscribe(bus.nc.new_inbox(), cb=take)  # pyright: ignore[reportUnknownMemberType] - nats-py types its callback as a bare Callable
    name: str | None = None
    try:
        with nats_errors():
            info = await bus.js.add_consumer(stream, consumer, deliver_subject=sub.subject)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its keyword arguments untyped
        name = info.name
        delivered = info.delivered.consumer_seq if info.delivered is not None else 0
        if info.num_pending or delivered:
            with anyio.move_on_after(timeout_s):
                await caught_up.wait()
    finally:
        with anyio.CancelScope(shield=True):
            await _unsubscribe(bus, sub)
            if name is not None and not bus.nc.is_closed:
                with suppress(BusError), nats_errors():
                    await bus.js.delete_consumer(stream, name)  # else its inactive threshold removes it
    return list(got)


class Follower:
    """A subject followed live (see `follow`)."""

    def __init__(self, bus: Bus, subject: str, *, after: int | None, idle_s: float) -> None:
        self.bus = bus
        self.subject = subject
        self.last = after
        """The last sequence given (None: only what comes after the subscription)."""
        self.idle_s = idle_s
        self._sub: JetStreamContext.PushSubscription | None = None
        self._reconnects = 0

    async def subscribe(self) -> None:
        self._reconnects = self.bus.nc.stats["reconnects"]
        deliver_policy = DeliverPolicy.NEW if self.last is None else DeliverPolicy.ALL
        config = None
        if self.last:
            deliver_policy = DeliverPolicy.BY_START_SEQUENCE
            config = ConsumerConfig(opt_start_seq=self.last + 1)
        with nats_errors():
            self._sub = await self.bus.js.subscribe(
                self.subject, ordered_consumer=True, deliver_policy=deliver_policy, config=config
            )

    async def next(self) -> StoredMessage | None:
        """The next message, or None after `idle_s` without one (the caller's moment to look
        around); re-subscribes after a reconnect."""
        assert self._sub is not None, "subscribe() first"
        try:
            with nats_errors():
                msg = await self._sub.next_msg(timeout=self.idle_s)
        except TimeoutError:
            if self.bus.nc.stats["reconnects"] != self._reconnects and self.bus.nc.is_connected:
                await self.close()
                await self.subscribe()
            return None
        seq = msg.metadata.sequence.stream
        if self.last is not None and seq <= self.last:
            return None  # replayed by a fresh subscription
        self.last = seq
        return StoredMessage(msg.subject, msg.data, seq, dict(msg.headers or {}))

    async def close(self) -> None:
        await _unsubscribe(self.bus, self._sub)
        self._sub = None


@asynccontextmanager
async def follow(
    bus: Bus, subject: str, *, after: int | None = 0, idle_s: float = 2.0
) -> AsyncGenerator[Follower]:
    """`subject` (wildcards allowed) followed from after stream sequence `after` (0: from its
    first message; None: only what is published from now on), subscribed on entry."""
    follower = Follower(bus, subject, after=after, idle_s=idle_s)
    await follower.subscribe()
    try:
        yield follower
    finally:
        with anyio.CancelScope(shield=True):
            await follower.close()


def _headers(raw: object) -> dict[str, str]:
    """A stored message's headers (nats-py types them as a bare `Dict`)."""
    return dict(cast("dict[str, str] | None", raw) or {})


async def _unsubscribe(bus: Bus, sub: Subscription | None) -> None:
    if sub is not None and not bus.nc.is_closed:
        with suppress(BusError), nats_errors():
            await sub.unsubscribe()
