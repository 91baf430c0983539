"""A continuous pull from a durable consumer: messages are handed over the moment they arrive.

nats-py's `fetch(n)` returns only when `n` messages came or its timeout ran out, so a worker
fetching a batch would sit on the first message of a quiet queue for the whole timeout. Instead
this keeps pull requests open (`batch` = free capacity, `expires` bounded) on a private inbox and
yields each message as JetStream delivers it: one request per batch, none per message.

Status replies end a request early: 408 (expired), 409 (e.g. max ack pending reached, leadership
change) and 404 carry `Nats-Pending-Messages`, the part of the batch that will not come.
"""

import json
import math
from dataclasses import dataclass

import anyio
import nats.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from bus.connection import Bus, nats_errors

_STATUS = "Status"
_PENDING = "Nats-Pending-Messages"
_LOST_REQUEST_GRACE_S = 2.0


@dataclass(frozen=True)
class ConsumerState:
    """Where a durable consumer stands, as the server counts it."""

    pending: int
    """Messages of its stream not yet delivered to it."""
    unacked: int
    """Delivered and held by a worker, not yet acked."""
    redelivered: int
    """Held messages delivered more than once."""
    waiting: int
    """Open pull requests (workers waiting for a message)."""


async def consumer_state(bus: Bus, stream: str, durable: str) -> ConsumerState:
    """The counts of the durable `durable` on `stream`.

    Raises:
        BusNotFound: no such consumer (or stream).
    """
    with nats_errors():
        info = await bus.js.consumer_info(stream, durable)
    return ConsumerState(
        pending=info.num_pending or 0,
        unacked=info.num_ack_pending or 0,
        redelivered=info.num_redelivered or 0,
        waiting=info.num_waiting or 0,
    )


class PullFeed:
    """Open pull requests against one durable and the messages they bring."""

    def __init__(self, bus: Bus, *, stream: str, durable: str, expires_s: float) -> None:
        self.bus = bus
        self.expires_s = expires_s
        self.outstanding = 0
        """Messages asked for and not yet delivered (or declared undeliverable)."""
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = bus.nc.new_inbox()
        self._sub: Subscription | None = None
        # Unbounded is bounded in practice: no more than `outstanding` messages (plus a few status
        # replies) can arrive, and the actor asks for no more than its free capacity.
        self._send, self._receive = anyio.create_memory_object_stream[Msg](math.inf)

    async def open(self) -> None:
        async def deliver(msg: Msg) -> None:
            self._send.send_nowait(msg)

        with nats_errors():
            self._sub = await self.bus.nc.subscribe(self._inbox, cb=deliver)  # pyright: ignore[reportUnknownMemberType] - nats-py types its callback as a bare Callable

    async def request(self, batch: int) -> None:
        """Ask for up to `batch` more messages, delivered as they become available."""
        request = {"batch": batch, "expires": int(self.expires_s * 1e9)}
        with nats_errors():
            await self.bus.nc.publish(self._next_subject, json.dumps(request).encode(), reply=self._inbox)
        self.outstanding += batch

    async def next_message(self) -> Msg | None:
        """The next message; None when a request ended without one (then ask again)."""
        msg = None
        # A request expires server-side after `expires_s`; silence for longer means it was lost
        # (reconnect, node failover), so forget it and ask again.
        with anyio.move_on_after(self.expires_s + _LOST_REQUEST_GRACE_S):
            msg = await self._receive.receive()
        if msg is None:
            self.outstanding = 0
            return None
        status = msg.headers.get(_STATUS) if msg.headers else None
        if not status:
            self.outstanding = max(0, self.outstanding - 1)
            return msg
        if status == "100":  # idle heartbeat / flow control
            return None
        undelivered = msg.headers.get(_PENDING) if msg.headers else None
        self.outstanding = max(0, self.outstanding - int(undelivered)) if undelivered else 0
        return None

    async def close(self) -> None:
        """Stop pulling; messages delivered but not yet taken are handed back at once (nak)."""
        if self._sub is None or self.bus.nc.is_closed:
            return
        # Unsubscribing removes our interest, so JetStream drops our open requests instead of
        # delivering into the void (which would hold those messages until ack_wait).
        try:
            await self._sub.unsubscribe()
        except nats.errors.Error:
            return
        while True:
            try:
                msg = self._receive.receive_nowait()
            except anyio.WouldBlock:
                break
            if msg.reply and not (msg.headers and msg.headers.get(_STATUS)):
                try:
                    await msg.nak()
                except nats.errors.Error:
                    break
        self._send.close()
        self._receive.close()
