"""Malformed, wrong-version and undeliverable messages become dead-letter events."""

import json

import anyio
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from agents.client import is_final, submit_task
from agents.messages import TaskSubmitted
from agents.orchestrator import ECHO, orchestrator_spec
from agents.orchestrator.records import TaskRecords
from agents.roles.echo import EchoRequest, echo_spec
from bus import subjects
from bus.connection import Bus
from bus.envelope import Envelope
from tests.bus._bus_support import collect_events, running, wait_stream_empty

pytestmark = pytest.mark.anyio


async def test_malformed_and_wrong_version_messages_are_dead_lettered_and_workers_keep_running(
    bus: Bus,
) -> None:
    """Each bad message gives a DeadLetter event with its reason; a good task still completes."""
    records = await TaskRecords.open(bus)
    future = Envelope.wrap(EchoRequest(text="x"), task_id="t-version").model_dump(mode="json")
    future["schema_version"] = 99
    bad_kind = Envelope.wrap(EchoRequest(text="x"), task_id="t-kind").model_dump(mode="json")
    bad_kind["kind"] = "no_such_kind"
    async with running(bus, orchestrator_spec(records, pipeline=ECHO), echo_spec()) as actors:
        await bus.publish_bytes(subjects.TASK_SUBMIT, b"{not json")
        await bus.publish_bytes(subjects.work("echo"), json.dumps(future).encode())
        await bus.publish_bytes(subjects.work("echo"), json.dumps(bad_kind).encode())
        # A valid envelope of a kind the echo role does not take.
        wrong_role = Envelope.wrap(TaskSubmitted(text="x", repo="/repo"), task_id="t-role")
        await bus.publish(subjects.work("echo"), wrong_role)
        good, _ = await submit_task(bus, TaskSubmitted(text="still alive", repo="/repo"))
        with anyio.fail_after(10):
            unknown = await collect_events(bus, "unknown", lambda evs: len(evs) >= 1)
            version = await collect_events(bus, "t-version", lambda evs: len(evs) >= 1)
            kind = await collect_events(bus, "t-kind", lambda evs: len(evs) >= 1)
            role = await collect_events(bus, "t-role", lambda evs: len(evs) >= 1)
            done = await collect_events(bus, good.task_id, lambda evs: is_final(evs[-1]))
        assert sum(a.stats.dead_lettered for a in actors) == 4
    assert unknown[0].kind == "dead_letter" and unknown[0].payload["reason"] == "malformed"
    assert "not JSON" in unknown[0].payload["error"]
    assert unknown[0].payload["subject"] == subjects.TASK_SUBMIT
    assert version[0].payload["reason"] == "unsupported_schema_version"
    assert "99" in version[0].payload["error"]
    assert kind[0].payload["reason"] == "malformed" and "no_such_kind" in kind[0].payload["error"]
    assert role[0].payload["reason"] == "malformed" and "echo_request" in role[0].payload["error"]
    assert done[-1].payload["status"] == "done"
    # Dead-lettered messages are terminated: nothing is left in the work queues.
    with anyio.fail_after(5):
        await wait_stream_empty(bus, subjects.WORK_STREAM)


async def test_a_message_never_acked_by_its_last_delivery_is_dead_lettered_from_the_advisory(
    bus: Bus,
) -> None:
    """A worker dying with the last delivery leaves the message; the advisory route dead-letters it."""
    address = subjects.RoleAddress.worker("flaky")
    await bus.js.add_consumer(
        address.stream,
        ConsumerConfig(
            durable_name=address.durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=0.5,
            max_deliver=1,
            filter_subject=address.filter_subject,
        ),
    )
    sub = await bus.js.pull_subscribe(address.filter_subject, durable=address.durable, stream=address.stream)
    envelope = Envelope.wrap(EchoRequest(text="lost"), task_id="t-lost")
    async with running(bus):
        await bus.publish(subjects.work("flaky"), envelope)
        (held,) = await sub.fetch(1, timeout=5)  # held and never acked, as by a killed worker
        assert held.metadata.num_delivered == 1
        with anyio.fail_after(10):
            letters = await collect_events(bus, "t-lost", lambda evs: len(evs) >= 1)
        # The dead letter is published before the message is deleted, so a crash between loses nothing.
        with anyio.fail_after(10):
            await wait_stream_empty(bus, subjects.WORK_STREAM)
    await sub.unsubscribe()
    assert letters[0].payload["reason"] == "max_deliveries"
    assert letters[0].payload["deliveries"] == 1
    assert json.loads(letters[0].payload["data"])["id"] == envelope.id


async def test_dead_lettered_and_invalid_submissions_end_as_rejected_records(bus: Bus) -> None:
    """No record stays `submitted`: a submission the orchestrator cannot read, or one that fails the
    bus-side checks, ends `rejected` with the reason, and its event stream ends with a result."""
    from agents.orchestrator.rejections import watch_rejections

    records = await TaskRecords.open(bus)
    future = Envelope.wrap(TaskSubmitted(text="x", repo="/repo"), task_id="t-future").model_dump(mode="json")
    future["schema_version"] = 99
    async with anyio.create_task_group() as tg:
        await tg.start(watch_rejections, bus)
        async with running(bus, orchestrator_spec(records, pipeline=ECHO), echo_spec()):
            await bus.publish_bytes(subjects.TASK_SUBMIT, json.dumps(future).encode())
            await submit_task(bus, TaskSubmitted(text="relative", repo="some/where"), task_id="t-relative")
            with anyio.fail_after(10):
                ended = {
                    task_id: (await collect_events(bus, task_id, lambda evs: is_final(evs[-1])))[-1]
                    for task_id in ("t-future", "t-relative")
                }
        tg.cancel_scope.cancel()
    for task_id, final in ended.items():
        assert final.payload["status"] == "rejected", task_id
        state = await records.get(task_id)
        assert state is not None and state.status == "rejected" and state.error
    assert "99" in ended["t-future"].payload["report"]
    assert "not absolute" in ended["t-relative"].payload["report"]
