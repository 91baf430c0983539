"""Helpers shared by the bus tests."""

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

from agents.client import watch_task
from bus.actor import Actor, ActorSpec
from bus.connection import Bus
from bus.dead_letters import watch_max_deliveries
from bus.envelope import Envelope
from bus.supervise import Supervisor


@asynccontextmanager
async def running(bus: Bus, *specs: ActorSpec) -> AsyncIterator[list[Actor]]:
    """Run actors (each under a supervisor) plus the dead-letter watcher; drain and stop on exit."""
    actors = [Actor(bus, spec) for spec in specs]
    async with anyio.create_task_group() as tg:
        await tg.start(watch_max_deliveries, bus)
        for actor in actors:
            await tg.start(Supervisor(actor.role, actor.run).run)
        yield actors
        for actor in actors:
            actor.stop()
        with anyio.fail_after(10):
            for actor in actors:
                await actor.drained.wait()
        tg.cancel_scope.cancel()


async def collect_events(bus: Bus, task_id: str, until: Callable[[list[Envelope]], bool]) -> list[Envelope]:
    """Events of a task, from its first, until `until(events)` holds."""
    events: list[Envelope] = []
    with anyio.CancelScope() as scope:

        def on_event(envelope: Envelope) -> None:
            events.append(envelope)
            if until(events):
                scope.cancel()

        await watch_task(bus, task_id, on_event, until_final=False)
    return events


async def wait_stream_empty(bus: Bus, stream: str) -> None:
    """Poll until a work-queue stream holds no message; JetStream publishes no event for that."""
    while (await bus.js.stream_info(stream)).state.messages:  # noqa: ASYNC110
        await anyio.sleep(0.05)
