"""A work queue of plain jobs (`bus.work_queue`) on a real nats-server: a job is acked only once
its handler returned, a worker that is stopped hands its job to another at once, a job no worker
finishes is reported as given up, and a malformed one is dropped for good."""

import anyio
import pytest

from bus.connection import MSG_ID_HEADER, Bus
from bus.consume import consumer_state
from bus.stored import delete_message
from bus.work_queue import Job, WorkQueue, ensure_work_queue, given_up, take_jobs

pytestmark = pytest.mark.anyio

QUEUE = WorkQueue(stream="TEST_JOBS", subject_prefix="test.jobs", durable="test-workers", ack_wait_s=30.0)


async def _publish(bus: Bus, *bodies: bytes) -> None:
    for n, body in enumerate(bodies):
        await bus.publish_bytes(f"{QUEUE.subject_prefix}.run", body, headers={MSG_ID_HEADER: f"job-{n}"})


async def _stored_jobs(bus: Bus) -> int:
    """Jobs still in the work-queue stream (acked and termed ones are removed)."""
    return (await bus.js.stream_info(QUEUE.stream)).state.messages


async def test_every_job_is_handled_once_and_removed_from_the_queue_after_its_handler_returned(
    bus: Bus,
) -> None:
    """Our contract: at-least-once with the ack after the handler, so a finished job is gone."""
    await ensure_work_queue(bus, QUEUE)
    await _publish(bus, b"a", b"b", b"c")
    seen: list[bytes] = []
    all_seen = anyio.Event()

    async def handle(job: Job) -> None:
        seen.append(job.data)
        if len(seen) == 3:
            all_seen.set()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(
                lambda task_status: take_jobs(bus, QUEUE, handle, concurrency=2, task_status=task_status)
            )
            await all_seen.wait()
            # The ack follows the handler's return; polling the stream: no event exists for it.
            while await _stored_jobs(bus):  # noqa: ASYNC110
                await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
    assert sorted(seen) == [b"a", b"b", b"c"]


async def test_a_worker_stopped_mid_job_hands_it_to_the_next_worker_at_once(bus: Bus) -> None:
    """A cancelled worker naks what it holds: the next one gets it without the 30 s ack wait."""
    await ensure_work_queue(bus, QUEUE)
    await _publish(bus, b"long")
    started = anyio.Event()

    async def hang(job: Job) -> None:
        started.set()
        await anyio.sleep_forever()

    taken: list[int] = []
    done = anyio.Event()

    async def finish(job: Job) -> None:
        taken.append(job.deliveries)
        done.set()

    with anyio.fail_after(15):  # well under the ack wait
        async with anyio.create_task_group() as first:
            first.start_soon(lambda: take_jobs(bus, QUEUE, hang))
            await started.wait()
            held = await consumer_state(bus, QUEUE.stream, QUEUE.durable)
            first.cancel_scope.cancel()
        async with anyio.create_task_group() as second:
            second.start_soon(lambda: take_jobs(bus, QUEUE, finish))
            await done.wait()
            second.cancel_scope.cancel()
    assert (held.pending, held.unacked) == (0, 1)
    assert taken == [2]


@pytest.mark.slow
async def test_a_job_no_worker_finishes_is_reported_as_given_up_and_a_malformed_one_is_dropped(
    bus: Bus,
) -> None:
    """After `max_deliver` crashed deliveries JetStream gives up and `given_up` says which job;
    a job the handler terms is never delivered again."""
    queue = WorkQueue(
        stream=QUEUE.stream, subject_prefix=QUEUE.subject_prefix, durable="test-dying", max_deliver=2
    )
    await ensure_work_queue(bus, queue)

    async def crash_or_drop(job: Job) -> None:
        if job.data == b"malformed":
            await job.term()
            return
        raise RuntimeError("this worker dies on it")

    with anyio.fail_after(30):
        async with given_up(bus, queue) as dead:
            await _publish(bus, b"malformed", b"doomed")
            async with anyio.create_task_group() as tg:

                async def worker() -> None:
                    # The crash ends a worker (its supervisor's business): start another, as one would.
                    while True:
                        try:
                            await take_jobs(bus, queue, crash_or_drop)
                        except* RuntimeError:
                            pass

                tg.start_soon(worker)
                stored = await anext(aiter(dead))
                tg.cancel_scope.cancel()
    assert stored.data == b"doomed"
    await delete_message(bus, queue.stream, stored.seq)
    assert await _stored_jobs(bus) == 0
