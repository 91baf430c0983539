"""A work queue of plain jobs: work that is no envelope of the agents' pipeline (a SWE-bench
instance, `codeloop.swebench.distribution`) on a stream of its own, taken by workers on any
machine from one shared durable pull consumer.

`take_jobs` is the actor runtime's consumer machinery (`bus.consume.PullFeed`, in-progress
heartbeats, a nak when a worker is stopped or its handler crashes) without the envelope layer:
a handler gets the bytes and settles nothing itself but a `term` for a job no redelivery can help;
the job is acked when the handler returns, never before. A job held by a worker that died comes
back after the consumer's ack wait; after `max_deliver` deliveries JetStream gives up on it, and
`given_up` reports it (from JetStream's MAX_DELIVERIES advisory) to whoever waits for its result.
"""

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup, TaskStatus
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig

from bus.connection import Bus, nats_errors, subscription
from bus.consume import PullFeed
from bus.errors import BusError, BusNotFound
from bus.stored import StoredMessage, message_at
from bus.streams import DUPLICATE_WINDOW_S, ensure_stream

PULL_EXPIRES_S = 5.0
"""Lifetime of one open pull request: how often an idle worker looks at its idle time."""
CRASH_BACKOFF_S = 5.0
"""A job whose handler crashed is offered again after this long."""


@dataclass(frozen=True)
class WorkQueue:
    """A work-queue stream and the durable consumer its workers share."""

    stream: str
    subject_prefix: str
    """The stream takes `<subject_prefix>.>`."""
    durable: str
    ack_wait_s: float = 120.0
    """Held this long without a heartbeat, a job goes to another worker (for a consumer made here:
    an existing consumer keeps the ack wait it was made with)."""
    max_deliver: int = 3

    @property
    def subjects(self) -> str:
        return f"{self.subject_prefix}.>"


async def ensure_work_queue(bus: Bus, queue: WorkQueue) -> None:
    """Create (idempotently) the queue's stream and, when missing, its durable consumer."""
    await ensure_stream(
        bus,
        StreamConfig(
            name=queue.stream,
            subjects=[queue.subjects],
            retention=RetentionPolicy.WORK_QUEUE,
            num_replicas=bus.config.replicas,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
        ),
    )
    try:
        with nats_errors():
            await bus.js.consumer_info(queue.stream, queue.durable)
    except BusNotFound:
        config = ConsumerConfig(
            durable_name=queue.durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=queue.ack_wait_s,
            max_deliver=queue.max_deliver,
            filter_subject=queue.subjects,
        )
        with nats_errors():
            await bus.js.add_consumer(queue.stream, config)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped


async def ack_wait_of(bus: Bus, queue: WorkQueue) -> float:
    """The ack wait the queue's consumer has on the server (it decides the heartbeats)."""
    with nats_errors():
        info = await bus.js.consumer_info(queue.stream, queue.durable)
    return float(info.config.ack_wait or queue.ack_wait_s)


class Job:
    """One delivery of a job to this worker."""

    def __init__(self, msg: Msg) -> None:
        self._msg = msg
        self.data = msg.data
        self.subject = msg.subject
        self.deliveries = msg.metadata.num_delivered
        """1 on the first delivery; more after a worker died or crashed on it."""
        self.settled = False

    async def term(self) -> None:
        """Drop the job for good (malformed: no redelivery can help)."""
        with nats_errors():
            await self._msg.term()
        self.settled = True

    async def _ack(self) -> None:
        with nats_errors():
            await self._msg.ack()
        self.settled = True

    async def _nak(self, delay_s: float) -> None:
        with nats_errors():
            await self._msg.nak(delay=delay_s)
        self.settled = True

    async def _in_progress(self) -> None:
        with nats_errors():
            await self._msg.in_progress()


JobHandler = Callable[[Job], Awaitable[None]]


@dataclass
class _Held:
    """The jobs this worker holds, and when it last had work."""

    jobs: dict[int, tuple[Job, float]] = field(default_factory=dict[int, tuple[Job, float]])
    freed: anyio.Event = field(default_factory=anyio.Event)
    last_work: float = field(default_factory=anyio.current_time)


async def take_jobs(
    bus: Bus,
    queue: WorkQueue,
    handle: JobHandler,
    *,
    concurrency: int = 1,
    idle_exit_s: float | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run `handle` on up to `concurrency` jobs at a time until cancelled, or, with `idle_exit_s`,
    until no job was held or came for that long. A crash of `handle` naks its job (offered again
    after `CRASH_BACKOFF_S`) and ends this worker with the crash, as the actor runtime's
    infrastructure failures do; cancellation naks every held job for another worker at once.

    Raises:
        BusNotFound: the queue does not exist (`ensure_work_queue`).
    """
    heartbeat_s = max(0.5, await ack_wait_of(bus, queue) / 3)
    feed = PullFeed(bus, stream=queue.stream, durable=queue.durable, expires_s=PULL_EXPIRES_S)
    await feed.open()
    held = _Held()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_heartbeats, held, heartbeat_s)
            task_status.started()
            await _pull(feed, held, tg, handle, concurrency=concurrency, idle_exit_s=idle_exit_s)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await feed.close()


async def _pull(
    feed: PullFeed,
    held: _Held,
    tg: TaskGroup,
    handle: JobHandler,
    *,
    concurrency: int,
    idle_exit_s: float | None,
) -> None:
    """Take jobs until idle for `idle_exit_s` (None: until cancelled)."""
    while True:
        free = concurrency - len(held.jobs) - feed.outstanding
        if free > 0:
            await feed.request(free)
        elif feed.outstanding == 0:  # every slot busy: wait for one
            held.freed = anyio.Event()
            await held.freed.wait()
            continue
        msg = await feed.next_message()
        if msg is None:
            quiet_s = anyio.current_time() - held.last_work
            if idle_exit_s is not None and not held.jobs and quiet_s > idle_exit_s:
                return
            continue
        job = Job(msg)
        held.jobs[id(job)] = (job, time.monotonic())
        held.last_work = anyio.current_time()
        tg.start_soon(_run, held, job, handle)


async def _run(held: _Held, job: Job, handle: JobHandler) -> None:
    try:
        await handle(job)
        if not job.settled:
            await job._ack()  # pyright: ignore[reportPrivateUsage] - the runtime settles, handlers do not
    except BaseException as exc:
        cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
        with anyio.CancelScope(shield=True), anyio.move_on_after(2), suppress(BusError):
            if not job.settled:
                await job._nak(0.0 if cancelled else CRASH_BACKOFF_S)  # pyright: ignore[reportPrivateUsage] - as above
        raise
    finally:
        held.jobs.pop(id(job), None)
        held.last_work = anyio.current_time()
        held.freed.set()


async def _heartbeats(held: _Held, interval_s: float) -> None:
    """Tell JetStream every held job is still in progress, so long work is not redelivered."""
    while True:
        await anyio.sleep(interval_s)
        due = time.monotonic() - interval_s
        for job, started in list(held.jobs.values()):
            if started <= due:
                with suppress(BusError):  # the job's own end will say what went wrong
                    await job._in_progress()  # pyright: ignore[reportPrivateUsage] - as above


@asynccontextmanager
async def given_up(bus: Bus, queue: WorkQueue) -> AsyncGenerator[AsyncIterator[StoredMessage]]:
    """The jobs the queue's consumer gave up on (delivered `max_deliver` times, never acked), as
    they happen: subscribed on entry. Each is still stored; `bus.stored.delete_message` removes it."""
    advisory = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{queue.stream}.{queue.durable}"
    async with subscription(bus, advisory) as advisories:
        yield _stored(bus, queue, advisories)


async def _stored(
    bus: Bus, queue: WorkQueue, advisories: AsyncIterator[bytes]
) -> AsyncIterator[StoredMessage]:
    async for raw in advisories:
        seq = int(json.loads(raw).get("stream_seq", 0))
        try:
            yield await message_at(bus, queue.stream, seq)
        except BusNotFound:  # acked or removed meanwhile
            continue
