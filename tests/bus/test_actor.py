"""The actor runtime's delivery rules, each against a real JetStream consumer."""

import anyio
import pytest

from agents.roles.echo import EchoRequest, EchoResult
from bus import subjects
from bus.actor import Actor, ActorSpec, Delivery, DeliveryPolicy, Reply, RetryLater
from bus.connection import Bus
from bus.envelope import Envelope
from bus.supervise import RestartPolicy, Supervisor
from tests.bus._bus_support import collect_events, running, wait_stream_empty

pytestmark = pytest.mark.anyio
ROLE = "probe"


def _spec(handler, **policy) -> ActorSpec:
    return ActorSpec(
        address=subjects.RoleAddress.worker(ROLE), handler=handler, policy=DeliveryPolicy(**policy)
    )


async def _send(bus: Bus, text: str = "x", task_id: str = "t1") -> Envelope:
    envelope = Envelope.wrap(EchoRequest(text=text), task_id=task_id)
    await bus.publish(subjects.work(ROLE), envelope)
    return envelope


async def _reply(delivery: Delivery) -> None:
    result = delivery.envelope.reply(EchoResult(text="ok"), id=delivery.derived_id("r"))
    await delivery.publish(subjects.event(delivery.envelope.task_id, "result"), result)


@pytest.mark.slow
async def test_long_handler_heartbeats_keep_its_message_from_redelivery(bus: Bus) -> None:
    """In-progress heartbeats hold the message past ack_wait; a second worker never sees it."""
    calls = 0

    async def slow(delivery: Delivery) -> None:
        nonlocal calls
        calls += 1
        await anyio.sleep(2.0)  # the long work itself: more than three ack_waits
        await _reply(delivery)

    spec = _spec(slow, ack_wait_s=0.6, heartbeat_s=0.15)
    async with running(bus, spec, spec) as (first, second):
        await _send(bus)
        with anyio.fail_after(15):
            await collect_events(bus, "t1", lambda evs: len(evs) >= 1)
    assert calls == 1
    assert first.stats.heartbeats + second.stats.heartbeats >= 3


async def test_transient_failures_are_retried_then_dead_lettered_after_max_deliveries(bus: Bus) -> None:
    """RetryLater naks with back-off; at the last delivery the message is terminated and dead-lettered."""
    seen: list[int] = []

    async def failing(delivery: Delivery) -> None:
        seen.append(delivery.num_delivered)
        raise RetryLater("dependency unavailable")

    async with running(bus, _spec(failing, max_deliver=3, backoff_s=(0.05, 0.1))) as (actor,):
        await _send(bus, task_id="t-retry")
        with anyio.fail_after(10):
            letters = await collect_events(bus, "t-retry", lambda evs: len(evs) >= 1)
    assert seen == [1, 2, 3]
    assert actor.stats.naked == 2
    assert letters[0].payload["reason"] == "max_deliveries"
    assert "dependency unavailable" in letters[0].payload["error"]
    assert letters[0].payload["deliveries"] == 3


async def test_a_failing_handler_naks_only_its_message_and_reports_a_handler_error(bus: Bus) -> None:
    """A handler's exception is its message's alone: nak with back-off, a `handler_error` event, and
    the same worker handles the redelivery; nothing crashes."""
    attempts = 0

    async def fails_once(delivery: Delivery) -> Reply:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise RuntimeError("bug on first try")
        return Reply(subjects.event(delivery.envelope.task_id, "result"), EchoResult(text="ok"))

    async with running(bus, _spec(fails_once, backoff_s=(0.05,))) as (actor,):
        await _send(bus, task_id="t-crash")
        with anyio.fail_after(10):
            events = await collect_events(
                bus, "t-crash", lambda evs: any(e.kind == "echo_result" for e in evs)
            )
    errors = [e for e in events if e.kind == "event" and e.payload["name"] == "handler_error"]
    assert attempts == 2 and actor.stats.naked == 1 and actor.stats.handled == 1
    assert len(errors) == 1 and "bug on first try" in errors[0].payload["message"]
    assert errors[0].payload["data"]["given_up"] is False


async def test_two_poison_messages_among_sixty_leave_the_healthy_ones_and_the_worker_running(
    bus: Bus,
) -> None:
    """One failing handler must not take its siblings down: poison messages are dead-lettered after
    their deliveries while all healthy messages beside them complete on the same worker."""

    async def handler(delivery: Delivery) -> Reply:
        request = delivery.envelope.open()
        if request.text == "poison":  # pyright: ignore[reportAttributeAccessIssue] - the echo role's requests are EchoRequests, which have text
            raise ValueError("cannot digest this")
        await anyio.sleep(0.01)
        return Reply(subjects.event(delivery.envelope.task_id, "result"), EchoResult(text=request.text))  # pyright: ignore[reportAttributeAccessIssue] - the echo role's requests are EchoRequests, which have text

    async with running(bus, _spec(handler, max_deliver=2, backoff_s=(0.05,), concurrency=16)) as (actor,):
        for i in range(60):
            await _send(bus, text="poison" if i in (7, 33) else f"ok-{i}", task_id="t-many")
        with anyio.fail_after(30):
            events = await collect_events(
                bus,
                "t-many",
                lambda evs: (
                    sum(e.kind == "echo_result" for e in evs) >= 58
                    and sum(e.kind == "dead_letter" for e in evs) >= 2
                ),
            )
        # still serving after the poison: one more message goes through
        await _send(bus, text="after", task_id="t-after")
        with anyio.fail_after(10):
            await collect_events(bus, "t-after", lambda evs: len(evs) >= 1)
    done = sorted(e.payload["text"] for e in events if e.kind == "echo_result")
    assert done == sorted(f"ok-{i}" for i in range(60) if i not in (7, 33))
    letters = [e for e in events if e.kind == "dead_letter"]
    assert {letter.payload["reason"] for letter in letters} == {"handler_error"}
    assert actor.stats.dead_lettered == 2


async def test_a_supervisor_gives_up_when_its_loop_keeps_crashing(bus: Bus) -> None:
    """Our choice: crashing more than max_restarts times within the window re-raises to the owner."""

    async def always_crashes(*, task_status) -> None:
        task_status.started()
        raise RuntimeError("broken")

    supervisor = Supervisor("x", always_crashes, RestartPolicy(max_restarts=2, backoff_s=(0.01,)))
    with anyio.fail_after(10), pytest.raises(BaseExceptionGroup):
        await supervisor.run()
    assert len(supervisor.restarts) == 2


async def test_stop_drains_in_flight_work_before_returning(bus: Bus) -> None:
    """On shutdown the message being handled finishes, is acked, and is not redelivered."""
    started = anyio.Event()
    release = anyio.Event()

    async def handler(delivery: Delivery) -> None:
        started.set()
        await release.wait()
        await _reply(delivery)

    actor = Actor(bus, _spec(handler))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(actor.run)
            await _send(bus, task_id="t-drain")
            await started.wait()
            actor.stop()
            assert not actor.drained.is_set()
            release.set()
        assert actor.drained.is_set()
    assert actor.stats.handled == 1
    with anyio.fail_after(5):  # the ack is asynchronous; once applied the work queue is empty
        await wait_stream_empty(bus, subjects.WORK_STREAM)
