"""A task end to end through the orchestrator and the echo role, and its idempotence."""

import anyio
import pytest

from agents.client import is_final, submit_task, watch_task
from agents.messages import TaskSubmitted
from agents.orchestrator import ECHO, orchestrator_spec
from agents.orchestrator.records import TaskRecords
from agents.roles.echo import echo_spec
from bus import subjects
from bus.connection import MSG_ID_HEADER, Bus
from tests.bus._bus_support import collect_events, running, wait_stream_empty

pytestmark = pytest.mark.anyio


async def test_a_submitted_task_is_carried_to_done_by_the_echo_role(bus: Bus) -> None:
    """Until the agents exist, echo carries a task end to end, visible as events."""
    records = await TaskRecords.open(bus)
    async with running(bus, orchestrator_spec(records, pipeline=ECHO), echo_spec()):
        envelope, _ = await submit_task(bus, TaskSubmitted(text="hello", repo="/repo"))
        with anyio.fail_after(10):
            events = await collect_events(bus, envelope.task_id, lambda evs: is_final(evs[-1]))
    assert [e.kind for e in events] == ["event", "event", "event", "task_result"]
    assert events[-1].payload["answer"] == "hello"
    assert events[-1].trace_id == envelope.trace_id
    state = await records.get(envelope.task_id)
    assert state is not None and state.status == "done"


async def test_the_same_task_published_twice_gives_one_task(bus: Bus) -> None:
    """A second publish with the same id is deduplicated, and one beyond the window is ignored."""
    records = await TaskRecords.open(bus)
    task = TaskSubmitted(text="once", repo="/repo")
    envelope, first = await submit_task(bus, task, task_id="same-task")
    _, second = await submit_task(bus, task, task_id="same-task")
    assert (first.duplicate, second.duplicate) == (False, True)
    # Past JetStream's deduplication window the stream stores it again; the orchestrator's claim stops it.
    await bus.publish_bytes(subjects.TASK_SUBMIT, envelope.to_bytes(), headers={MSG_ID_HEADER: "late-copy"})
    echo = echo_spec()
    async with running(bus, orchestrator_spec(records, pipeline=ECHO), echo) as actors:
        with anyio.fail_after(10):
            await watch_task(bus, "same-task", lambda e: None)
            await wait_stream_empty(bus, subjects.TASKS_STREAM)
        orchestrator_stats = actors[0].stats
    events = await collect_events(bus, "same-task", lambda evs: len(evs) >= 4)
    assert [e.kind for e in events] == ["event", "event", "event", "task_result"]
    assert orchestrator_stats.handled == 3  # two submissions, one echo result
    assert actors[1].stats.handled == 1
    assert [s.task_id for s in await records.all()] == ["same-task"]


async def test_a_late_result_of_a_superseded_step_changes_nothing(bus: Bus) -> None:
    """A result that answers a request the task no longer waits for (a slow worker's, after a
    redelivery went elsewhere) is recognised by its step and ignored: no new record, no event."""
    from agents.roles.echo import EchoResult
    from bus.envelope import Envelope

    records = await TaskRecords.open(bus)
    hold, started = anyio.Event(), anyio.Event()

    async def slow_echo(delivery):  # holds the work so the test can answer first, as another worker
        started.set()
        await hold.wait()
        return None

    from bus.actor import ActorSpec

    spec = ActorSpec(address=subjects.RoleAddress.worker("echo"), handler=slow_echo)
    async with running(bus, orchestrator_spec(records, pipeline=ECHO), spec):
        envelope, _ = await submit_task(bus, TaskSubmitted(text="hello", repo="/repo"), task_id="t-late")
        with anyio.fail_after(10):
            await started.wait()
        state = await records.get("t-late")
        request_id = state.outbox_request_id  # pyright: ignore[reportOptionalMemberAccess] - the record exists: the task was submitted above
        # the step's answer, caused by the request the record waits for: applied
        answer = Envelope.wrap(EchoResult(text="first"), task_id="t-late", causation_id=request_id)
        await bus.publish(subjects.task_result("echo"), answer)
        with anyio.fail_after(10):
            await watch_task(bus, "t-late", lambda e: None)
        done = await records.get("t-late")
        # a second, late answer to the same (now superseded) request: ignored
        late = Envelope.wrap(EchoResult(text="late"), task_id="t-late", causation_id=request_id)
        await bus.publish(subjects.task_result("echo"), late)
        with anyio.fail_after(10):
            await wait_stream_empty(bus, subjects.TASKS_STREAM)
        hold.set()
    after = await records.get("t-late")
    assert done.status == "done" and done.result.answer == "first"  # pyright: ignore[reportOptionalMemberAccess] - the task ended: its record has its result
    assert after == done
    events = await collect_events(bus, "t-late", lambda evs: is_final(evs[-1]))
    assert [e.kind for e in events].count("task_result") == 1
