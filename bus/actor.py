"""The actor runtime: the workers of a role share one durable pull consumer and handle its messages.

For each message a worker receives (a continuous pull, `bus/consume.py`):
- bytes that are not a valid envelope of our schema version: a `DeadLetter` event, then `term`;
- a redelivery (`num_delivered > 1`) of a message id this role already finished: `ack`, nothing else;
- otherwise the handler runs, inside a span whose parent is the trace context the message's
  headers carried (`bus.tracing`: one task is one trace across processes); while it runs, one
  heartbeat loop sends `in_progress` for every message held longer than `heartbeat_s`, so long
  work is not redelivered to another worker;
- handler returned: the runtime publishes the `Reply`s it returned (each under an id derived from
  the input's id and the reply's label, so a re-run republishes the same ids and JetStream stores
  them once), waits for their streams' acks, remembers the id as handled and acks — never before;
- `RetryLater` (or a bus timeout / no responders while publishing results): `nak` with the role's
  back-off; at the last allowed delivery, dead letter + `term`;
- any other exception is that message's alone: it is logged, a `handler_error` event is published
  on its task, and it is nak'ed with back-off (dead-lettered at the last delivery) while the worker
  keeps serving its other messages. Only infrastructure failures — the connection to NATS lost
  (`BusClosed`) — end the worker, whose supervisor (`bus.supervise`) restarts it.

`stop()` drains: no more fetches, in-flight handlers finish, then `run` returns. Cancellation
instead `nak`s every in-flight message (shielded) so another worker gets it at once.
"""

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field

import anyio
import nats.errors
from anyio.abc import TaskStatus
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from opentelemetry.trace import Span

from bus import subjects
from bus.connection import Bus, nats_errors
from bus.consume import PullFeed
from bus.dead_letters import publish_dead_letter
from bus.envelope import Envelope, parse_envelope
from bus.errors import BusClosed, BusTimeout, MalformedMessage, NoResponders, UnsupportedSchemaVersion
from bus.messages import Event, Message
from bus.records import read
from bus.tracing import handling_span

log = logging.getLogger("codeloop.bus")
_ID_NAMESPACE = uuid.UUID("6b1f1c2e-7d0a-4c1e-9a57-3f0f5a1c0de1")


class RetryLater(Exception):
    """A transient failure: give the message back for a later delivery (nak with back-off)."""

    def __init__(self, reason: str, *, delay_s: float | None = None) -> None:
        super().__init__(reason)
        self.delay_s = delay_s


@dataclass
class Delivery:
    """One delivery of a message to a handler."""

    envelope: Envelope
    subject: str
    num_delivered: int
    """1 on the first delivery; more after a crash, a timeout or a nak."""
    bus: Bus
    role: str

    def derived_id(self, label: str) -> str:
        """A message id that is the same on every redelivery, so republished results are deduplicated."""
        return uuid.uuid5(_ID_NAMESPACE, f"{self.envelope.id}/{self.role}/{label}").hex

    async def publish(self, subject: str, envelope: Envelope) -> None:
        """Publish a result and wait for its stream's ack (the runtime acks the input only after)."""
        await self.bus.publish(subject, envelope)


@dataclass(frozen=True)
class Reply:
    """A message a handler asks the runtime to publish once it returns."""

    subject: str
    payload: Message
    label: str = "reply"
    """Names the reply among the handler's replies; its id is derived from the input's id and
    this label, so it must be unique per handler run and the same on every re-run."""


Handler = Callable[[Delivery], Awaitable["Reply | list[Reply] | None"]]


@dataclass(frozen=True)
class DeliveryPolicy:
    """How a role's shared durable consumer delivers, retries and gives up on messages."""

    concurrency: int = 64
    """Messages one worker handles at once."""
    ack_wait_s: float = 30.0
    """Unacked for this long (no heartbeat), a message goes to another worker."""
    max_deliver: int = 8
    backoff_s: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0)
    """nak delay after the 1st, 2nd, ... failed delivery (the last repeats). With `max_deliver`
    this rides out ~40 s of trouble, e.g. a JetStream leader election after a node died."""
    heartbeat_s: float | None = None
    """Interval of in-progress heartbeats; default a third of `ack_wait_s`."""
    remember_handled: bool = True
    """Record handled message ids so a redelivery after a lost ack skips the handler."""
    pull_expires_s: float = 5.0
    """Lifetime of one open pull request; a lost request (failover) is noticed after this."""


@dataclass(frozen=True)
class ActorSpec:
    """A role's handler and the delivery policy of its shared durable consumer."""

    address: subjects.RoleAddress
    handler: Handler
    policy: DeliveryPolicy = field(default_factory=DeliveryPolicy)
    on_settled: Callable[[str, str], None] | None = None
    """Called with (message id or "", outcome) once a message is settled: `acked`, `skipped`
    (already handled), `naked` or `dead_lettered`; for metrics and benchmarks."""


@dataclass
class ActorStats:
    handled: int = 0
    skipped_duplicates: int = 0
    naked: int = 0
    dead_lettered: int = 0
    heartbeats: int = 0


@dataclass
class _InFlight:
    msg: Msg
    started: float = field(default_factory=time.monotonic)


class Actor:
    """One worker of a role; run several (in one process or many) to scale the role."""

    def __init__(self, bus: Bus, spec: ActorSpec) -> None:
        self.bus = bus
        self.spec = spec
        self.stats = ActorStats()
        self._stopping = anyio.Event()
        self._fetch_scope: anyio.CancelScope | None = None
        self._inflight: dict[int, _InFlight] = {}
        self._slot_freed = anyio.Event()
        self._handled_kv = None
        self.drained = anyio.Event()
        """Set when `run` returned after `stop()` with nothing in flight."""

    @property
    def policy(self) -> DeliveryPolicy:
        return self.spec.policy

    @property
    def role(self) -> str:
        return self.spec.address.role

    def stop(self) -> None:
        """Drain: fetch nothing more, let in-flight handlers finish, then `run` returns."""
        self._stopping.set()
        if self._fetch_scope is not None:
            self._fetch_scope.cancel()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Consume until `stop()` (returns) or cancellation / a handler crash (raises)."""
        address = self.spec.address
        with nats_errors():
            await self.bus.js.add_consumer(address.stream, self._consumer_config())  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
            if self.policy.remember_handled:
                self._handled_kv = await self.bus.js.key_value(subjects.HANDLED_BUCKET)
        feed = PullFeed(
            self.bus, stream=address.stream, durable=address.durable, expires_s=self.policy.pull_expires_s
        )
        await feed.open()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._heartbeat_loop)
                task_status.started()
                await self._pull_loop(feed, tg)
                while self._inflight:  # drain
                    await self._wait_slot()
                tg.cancel_scope.cancel()
            self.drained.set()
        finally:
            with anyio.CancelScope(shield=True):
                await feed.close()

    def _consumer_config(self) -> ConsumerConfig:
        policy = self.policy
        return ConsumerConfig(
            durable_name=self.spec.address.durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=policy.ack_wait_s,
            max_deliver=policy.max_deliver,
            filter_subject=self.spec.address.filter_subject,
            max_ack_pending=max(1000, policy.concurrency * 4),
        )

    async def _pull_loop(self, feed: PullFeed, tg: anyio.abc.TaskGroup) -> None:
        concurrency = self.policy.concurrency
        # Ask again once a quarter of the capacity is free: fewer, larger pull requests.
        refill_at = max(1, concurrency // 4)
        while not self._stopping.is_set():
            free = concurrency - len(self._inflight) - feed.outstanding
            if free >= refill_at or (free > 0 and feed.outstanding == 0):
                await feed.request(free)
            elif feed.outstanding == 0:
                await self._wait_slot()
                continue
            msg = None  # stays None when stop() cancels the wait below
            with anyio.CancelScope() as self._fetch_scope:
                if self._stopping.is_set():
                    break
                msg = await feed.next_message()
            self._fetch_scope = None
            if msg is not None:
                key = id(msg)
                self._inflight[key] = _InFlight(msg)
                tg.start_soon(self._handle, key, msg)

    async def _wait_slot(self) -> None:
        self._slot_freed = anyio.Event()
        await self._slot_freed.wait()

    async def _heartbeat_loop(self) -> None:
        interval = self.policy.heartbeat_s or self.policy.ack_wait_s / 3
        while True:
            await anyio.sleep(interval)
            due = time.monotonic() - interval
            for held in list(self._inflight.values()):
                if held.started <= due:
                    await held.msg.in_progress()
                    self.stats.heartbeats += 1

    async def _handle(self, key: int, msg: Msg) -> None:
        try:
            await self._handle_one(msg)
        except BaseException as exc:
            # Hand the message back now rather than after ack_wait: at once when we are being
            # shut down (another worker should take it), with back-off after a crash.
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            delay = 0.0 if cancelled else self._backoff(msg.metadata.num_delivered)
            with anyio.CancelScope(shield=True), anyio.move_on_after(2), suppress(nats.errors.Error):
                if not msg.is_acked and not self.bus.nc.is_closed:
                    await msg.nak(delay=delay)
            raise
        finally:
            self._inflight.pop(key, None)
            self._slot_freed.set()

    async def _handle_one(self, msg: Msg) -> None:
        deliveries = msg.metadata.num_delivered
        try:
            envelope = parse_envelope(msg.data)
        except MalformedMessage as exc:
            reason = (
                "unsupported_schema_version" if isinstance(exc, UnsupportedSchemaVersion) else "malformed"
            )
            await self._dead_letter(msg, None, reason, str(exc))
            return
        if deliveries > 1 and await self._was_handled(envelope.id):
            self.stats.skipped_duplicates += 1
            await msg.ack()
            self._settled(envelope.id, "skipped")
            return
        delivery = Delivery(envelope, msg.subject, deliveries, self.bus, self.role)
        last = deliveries >= self.policy.max_deliver
        try:
            with self._span(msg, envelope):
                replies = await self.spec.handler(delivery)
                for reply in _as_list(replies):
                    await delivery.publish(
                        reply.subject, envelope.reply(reply.payload, id=delivery.derived_id(reply.label))
                    )
        except MalformedMessage as exc:
            await self._dead_letter(msg, envelope.task_id, "malformed", str(exc))
            return
        except BusClosed:
            raise  # infrastructure: the worker cannot go on; its supervisor restarts it
        except (RetryLater, BusTimeout, NoResponders) as exc:
            # Bus timeouts are transient too: a stream electing a new leader after a node died.
            if last:
                await self._dead_letter(msg, envelope.task_id, "max_deliveries", f"still failing: {exc}")
            else:
                delay = getattr(exc, "delay_s", None)
                await self._nak(msg, envelope.id, delay if delay is not None else self._backoff(deliveries))
            return
        except Exception as exc:
            # This message's failure is its own: the worker keeps serving the others.
            error = f"{type(exc).__name__}: {exc}"
            log.warning(
                "%s: handler failed on %s (delivery %d of %d): %s",
                self.role,
                envelope.id,
                deliveries,
                self.policy.max_deliver,
                error,
                exc_info=exc,
            )
            await self._handler_error_event(envelope, deliveries, error, last=last)
            if last:
                await self._dead_letter(msg, envelope.task_id, "handler_error", error)
            else:
                await self._nak(msg, envelope.id, self._backoff(deliveries))
            return
        await self._remember(envelope.id)
        await msg.ack()
        self.stats.handled += 1
        self._settled(envelope.id, "acked")

    def _span(self, msg: Msg, envelope: Envelope) -> AbstractContextManager[Span]:
        """The handler's span, a child of the context the message carried (see `bus.tracing`)."""
        return handling_span(
            subject=msg.subject,
            headers=msg.headers,
            trace_id=envelope.trace_id,
            attributes={
                "messaging.message.id": envelope.id,
                "messaging.consumer.group.name": self.spec.address.durable,
                "codeloop.task.id": envelope.task_id,
                "codeloop.role": self.role,
                "codeloop.message.kind": envelope.kind,
                "codeloop.delivery": msg.metadata.num_delivered,
            },
        )

    async def _nak(self, msg: Msg, message_id: str, delay: float) -> None:
        self.stats.naked += 1
        await msg.nak(delay=delay)
        self._settled(message_id, "naked")

    async def _handler_error_event(
        self, envelope: Envelope, deliveries: int, error: str, *, last: bool
    ) -> None:
        event = Event(
            name="handler_error",
            message=f"{self.role} failed on a {envelope.kind} message: {error[:300]}",
            data={
                "role": self.role,
                "message_id": envelope.id,
                "message_kind": envelope.kind,
                "delivery": deliveries,
                "max_deliver": self.policy.max_deliver,
                "given_up": last,
            },
        )
        label = f"handler-error-{self.role}-{deliveries}"
        # Best effort: a failed event must not turn a handler error into a crash of the worker.
        try:
            await self.bus.publish(
                subjects.event(envelope.task_id, "handler_error"),
                envelope.reply(event, id=uuid.uuid5(_ID_NAMESPACE, f"{envelope.id}/{label}").hex),
            )
        except (BusTimeout, NoResponders) as exc:
            log.warning("%s: could not publish the handler_error event: %s", self.role, exc)

    def _settled(self, message_id: str, outcome: str) -> None:
        if self.spec.on_settled is not None:
            self.spec.on_settled(message_id, outcome)

    def _backoff(self, deliveries: int) -> float:
        steps = self.policy.backoff_s or (0.0,)
        return steps[min(deliveries, len(steps)) - 1]

    def _handled_key(self, message_id: str) -> str:
        return f"{self.spec.address.durable}.{subjects.token(message_id)}"

    async def _was_handled(self, message_id: str) -> bool:
        if self._handled_kv is None:
            return False
        return (await read(self._handled_kv, self._handled_key(message_id))).value is not None

    async def _remember(self, message_id: str) -> None:
        if self._handled_kv is None:
            return
        # Fire-and-forget into the KV stream, no pubAck round trip: the mark only matters if this
        # message is redelivered, which happens ack_wait after a lost ack, and the mark travels
        # on the same connection just before the ack.
        with nats_errors():
            await self.bus.nc.publish(f"$KV.{subjects.HANDLED_BUCKET}.{self._handled_key(message_id)}", b"1")

    async def _dead_letter(self, msg: Msg, task_id: str | None, reason: str, error: str) -> None:
        meta = msg.metadata
        await publish_dead_letter(
            self.bus,
            reason=reason,
            error=error,
            subject=msg.subject,
            data=msg.data,
            deliveries=meta.num_delivered,
            task_id=task_id,
            origin=f"{meta.stream}-{meta.sequence.stream}",
        )
        await msg.term()
        self.stats.dead_lettered += 1
        self._settled("", "dead_lettered")


def _as_list(replies: "Reply | list[Reply] | None") -> list[Reply]:
    if replies is None:
        return []
    return [replies] if isinstance(replies, Reply) else list(replies)
