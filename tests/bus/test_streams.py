"""Streams, KV buckets and object store of the bus contract (docs/bus-contract.md), created idempotently."""

import anyio
import pytest
from nats.js.api import RetentionPolicy

from bus import subjects
from bus.connection import Bus
from bus.errors import BusError
from bus.streams import ensure_streams

pytestmark = pytest.mark.anyio


async def test_ensure_streams_is_idempotent_and_creates_the_design_names(bus: Bus) -> None:
    """A second call changes nothing; the names and retentions match docs/bus-contract.md."""
    await ensure_streams(bus)
    tasks = await bus.js.stream_info(subjects.TASKS_STREAM)
    work = await bus.js.stream_info(subjects.WORK_STREAM)
    events = await bus.js.stream_info(subjects.EVENTS_STREAM)
    assert tasks.config.retention == RetentionPolicy.WORK_QUEUE
    assert work.config.retention == RetentionPolicy.WORK_QUEUE
    assert events.config.retention == RetentionPolicy.LIMITS
    assert events.config.subjects == ["codeloop.events.>"]
    await bus.js.key_value(subjects.TASKS_BUCKET)
    center = await bus.js.stream_info(f"KV_{subjects.CONFIG_BUCKET}")
    assert center.config.max_msgs_per_subject == 64  # the configuration center keeps 64 revisions
    await bus.js.key_value(subjects.USAGE_BUCKET)
    store = await bus.js.object_store(subjects.ARTIFACTS_BUCKET)
    await store.put("probe", b"x")
    assert (await store.get("probe")).data == b"x"
    assert tasks.config.num_replicas == 1


async def test_more_replicas_than_servers_is_refused_at_once_with_the_reason(bus: Bus) -> None:
    """Replicas 3 on one server is a configuration error, reported, not retried."""
    with anyio.fail_after(10), pytest.raises(BusError, match="replicas"):
        await ensure_streams(bus, replicas=3)
