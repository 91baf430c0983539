"""`bus` says "not there" with its own error type, so callers never dig nats-py's out of `__cause__`."""

import json

import anyio
import pytest

from agents.roles.echo import EchoRequest
from bus import subjects
from bus.connection import Bus
from bus.dead_letters import watch_max_deliveries
from bus.envelope import Envelope
from bus.errors import BusError, BusNotFound
from tests.bus._bus_support import collect_events

pytestmark = pytest.mark.anyio


async def test_a_bucket_that_does_not_exist_is_bus_not_found(bus: Bus) -> None:
    with pytest.raises(BusNotFound, match="not found") as missing:
        await bus.kv("no-such-bucket")
    assert isinstance(missing.value, BusError)


async def test_an_advisory_for_a_message_already_gone_is_skipped_and_the_watcher_goes_on(bus: Bus) -> None:
    """A MAX_DELIVERIES advisory may name a message another process already dead-lettered and
    deleted: that is no dead letter and no crash, and the next advisory is still served."""
    envelope = Envelope.wrap(EchoRequest(text="stuck"), task_id="t-gone")
    stored = await bus.publish(subjects.work("nobody"), envelope)
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(watch_max_deliveries, bus)
            for seq in (stored.seq + 1000, stored.seq):  # the first is not in the stream
                advisory = {
                    "stream": subjects.WORK_STREAM,
                    "stream_seq": seq,
                    "deliveries": 3,
                    "consumer": "codeloop-nobody",
                }
                await bus.nc.publish(
                    f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{subjects.WORK_STREAM}.codeloop-nobody",
                    json.dumps(advisory).encode(),
                )
            letters = await collect_events(bus, "t-gone", lambda events: len(events) >= 1)
            tg.cancel_scope.cancel()
    assert [letter.payload["reason"] for letter in letters] == ["max_deliveries"]
    assert json.loads(letters[0].payload["data"])["id"] == envelope.id
