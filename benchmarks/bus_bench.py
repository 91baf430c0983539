"""Bus benchmark: raw JetStream round trip vs one codeloop actor hop, and four-role pipeline throughput.

    .venv/bin/python benchmarks/bus_bench.py [--samples 400] [--tasks 2000]

Prints, in one run:
1. raw nats-py: publish (await the stream's ack) -> receive -> ack, one message at a time, from
   a pull request kept open on the durable consumer as the actor keeps one (`bus/consume.py`:
   the next message is already asked for when one arrives, so no pull round trip is timed): p50, p99;
2. the same through one codeloop actor hop: publish an envelope -> the actor receives, parses,
   runs a no-op handler, records the id as handled, acks: p50, p99, and the ratio to 1. [<= 1.5x]
3. no-op tasks through a four-role pipeline (each role's handler publishes the next role's
   message; the fourth publishes a result event), all in flight at once: tasks/s. [>= 300 on 2 cores]

Raw and actor-hop samples alternate one by one, so a change in machine load hits both alike.
Everything runs in this process against an embedded nats-server with its own temp state dir.
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig

from agents.roles.echo import EchoRequest
from bus import subjects
from bus.actor import Actor, ActorSpec, Delivery, DeliveryPolicy
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.envelope import Envelope
from bus.server import open_nats_server
from bus.streams import ensure_streams


def _percentiles(samples_s: list[float]) -> tuple[float, float]:
    ordered = sorted(samples_s)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p99 * 1000


class RawPull:
    """A raw nats-py pull from one durable consumer that keeps a request open, as the actor does:
    up to `batch` messages asked for at once on a private inbox, asked again once a quarter of
    them arrived, so a published message is delivered without waiting for a pull request."""

    def __init__(self, bus: Bus, *, stream: str, durable: str, policy: DeliveryPolicy) -> None:
        self.bus = bus
        self.batch = policy.concurrency
        self.expires_ns = int(policy.pull_expires_s * 1e9)
        self.outstanding = 0
        self._next = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = bus.nc.new_inbox()
        self._sub: Subscription | None = None

    async def open(self) -> None:
        self._sub = await self.bus.nc.subscribe(self._inbox)
        await self.refill()

    async def refill(self) -> None:
        """Ask for the free part of the batch once a quarter of it is free (the actor's rule)."""
        free = self.batch - self.outstanding
        if free >= max(1, self.batch // 4):
            request = json.dumps({"batch": free, "expires": self.expires_ns}).encode()
            await self.bus.nc.publish(self._next, request, reply=self._inbox)
            self.outstanding += free

    async def next_message(self) -> Msg:
        assert self._sub is not None
        while True:
            msg = await self._sub.next_msg(timeout=30)
            if not (msg.headers and msg.headers.get("Status")):
                self.outstanding -= 1
                return msg
            # A request ended (expired, 408): ask again; the actor's feed does the same.
            self.outstanding = 0
            await self.refill()

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()


async def round_trips(bus: Bus, samples: int) -> tuple[list[float], list[float]]:
    """Raw and actor-hop round trips, interleaved one by one so both see the same machine load."""
    await bus.js.add_stream(
        StreamConfig(name="BENCH_RAW", subjects=["bench.raw"], retention=RetentionPolicy.WORK_QUEUE)
    )
    policy = DeliveryPolicy()
    await bus.js.add_consumer(
        "BENCH_RAW",
        ConsumerConfig(durable_name="raw", ack_policy=AckPolicy.EXPLICIT, ack_wait=policy.ack_wait_s),
    )
    raw = RawPull(bus, stream="BENCH_RAW", durable="raw", policy=policy)
    await raw.open()
    payload = Envelope.wrap(EchoRequest(text="x"), task_id="bench").to_bytes()
    settled = anyio.Event()

    def on_settled(_id: str, _outcome: str) -> None:
        settled.set()

    async def no_op(_delivery: Delivery) -> None:
        return None

    spec = ActorSpec(
        address=subjects.RoleAddress.worker("bench-hop"), handler=no_op, policy=policy, on_settled=on_settled
    )
    actor = Actor(bus, spec)
    raw_times: list[float] = []
    hop_times: list[float] = []
    async with anyio.create_task_group() as tg:
        await tg.start(actor.run)
        for i in range(samples + 50):
            start = time.perf_counter()
            await bus.js.publish("bench.raw", payload)
            msg = await raw.next_message()
            await msg.ack()
            raw_s = time.perf_counter() - start
            await raw.refill()  # untimed: the actor asks again in its pull loop, beside the handler

            settled = anyio.Event()
            envelope = Envelope.wrap(EchoRequest(text="x"), task_id="bench")
            start = time.perf_counter()
            await bus.publish(subjects.work("bench-hop"), envelope)
            await settled.wait()
            hop_s = time.perf_counter() - start
            if i >= 50:  # warm-up
                raw_times.append(raw_s)
                hop_times.append(hop_s)
        actor.stop()
    await raw.close()
    return raw_times, hop_times


async def pipeline_throughput(bus: Bus, tasks: int) -> float:
    roles = ["bench-plan", "bench-retrieve", "bench-code", "bench-verify"]
    done = 0
    all_done = anyio.Event()

    def make_handler(next_subject: str):
        async def forward(delivery: Delivery) -> None:
            await delivery.publish(
                next_subject, delivery.envelope.reply(EchoRequest(text="x"), id=delivery.derived_id("n"))
            )

        return forward

    def on_last_settled(_id: str, outcome: str) -> None:
        nonlocal done
        if outcome == "acked":
            done += 1
            if done == tasks:
                all_done.set()

    nexts = [subjects.work(r) for r in roles[1:]] + [subjects.event("bench", "done")]
    specs = [
        ActorSpec(
            address=subjects.RoleAddress.worker(role),
            handler=make_handler(nxt),
            on_settled=on_last_settled if role == roles[-1] else None,
        )
        for role, nxt in zip(roles, nexts, strict=True)
    ]
    actors = [Actor(bus, spec) for spec in specs]
    async with anyio.create_task_group() as tg:
        for actor in actors:
            await tg.start(actor.run)
        start = time.perf_counter()
        envelopes = [Envelope.wrap(EchoRequest(text="x"), task_id=f"t{i}") for i in range(tasks)]

        async def submit(chunk: list[Envelope]) -> None:
            for envelope in chunk:
                await bus.publish(subjects.work(roles[0]), envelope)

        async with anyio.create_task_group() as submitters:
            for k in range(16):
                submitters.start_soon(submit, envelopes[k::16])
        await all_done.wait()
        elapsed = time.perf_counter() - start
        for actor in actors:
            actor.stop()
    return tasks / elapsed


async def main(samples: int, tasks: int) -> None:
    with tempfile.TemporaryDirectory(prefix="codeloop-bench-") as tmp:
        async with open_nats_server(Path(tmp)) as server, open_bus(BusConfig(servers=(server.url,))) as bus:
            await ensure_streams(bus)
            raw, hop = await round_trips(bus, samples)
            raw_p50, raw_p99 = _percentiles(raw)
            hop_p50, hop_p99 = _percentiles(hop)
            rate = await pipeline_throughput(bus, tasks)
    print(
        f"raw JetStream publish->receive->ack (pull kept open): p50 {raw_p50:.3f} ms  p99 {raw_p99:.3f} ms  (n={samples})"
    )
    print(
        f"one codeloop actor hop:                             p50 {hop_p50:.3f} ms  p99 {hop_p99:.3f} ms  (n={samples})"
    )
    print(
        f"actor hop / raw round trip (p50): {hop_p50 / raw_p50:.2f}x  (p99: {hop_p99 / raw_p99:.2f}x)  [target <= 1.5x]"
    )
    print(f"four-role pipeline, {tasks} no-op tasks in flight: {rate:.0f} tasks/s  [target >= 300]")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=400, help="round trips measured per latency figure")
    parser.add_argument("--tasks", type=int, default=2000, help="tasks pushed through the four-role pipeline")
    args = parser.parse_args()
    anyio.run(main, args.samples, args.tasks)
