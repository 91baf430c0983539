"""Task records in KV: compare-and-set on revision, and retry on a lost race."""

from datetime import UTC, datetime

import anyio
import pytest

from agents.messages import TaskState, TaskSubmitted
from agents.orchestrator.records import TaskRecords
from bus.connection import Bus

pytestmark = pytest.mark.anyio


def _state(task_id: str) -> TaskState:
    now = datetime.now(UTC)
    return TaskState(
        task_id=task_id,
        status="submitted",
        task=TaskSubmitted(text="t", repo="/repo"),
        created_at=now,
        updated_at=now,
    )


async def test_two_writers_racing_on_a_record_lose_neither_update(bus: Bus) -> None:
    """One writer wins by revision, the other retries on the new revision; both changes stay."""
    records = await TaskRecords.open(bus)
    await records.update("t1", lambda s: _state("t1"))
    slow_has_read = anyio.Event()
    fast_has_written = anyio.Event()
    slow_calls = 0

    async def slow_writer() -> None:
        def bump_step(state: TaskState | None) -> TaskState:
            nonlocal slow_calls
            slow_calls += 1
            assert state is not None
            return state.model_copy(update={"step_seq": state.step_seq + 1})

        async def change(state: TaskState | None) -> TaskState:
            result = bump_step(state)
            if slow_calls == 1:  # read the old revision, then let the other writer win
                slow_has_read.set()
                await fast_has_written.wait()
            return result

        await _update_async(records, "t1", change)

    async def fast_writer() -> None:
        await slow_has_read.wait()
        await records.update("t1", lambda s: s.model_copy(update={"revisions": s.revisions + 1}))  # pyright: ignore[reportOptionalMemberAccess] - the record exists: it was created above
        fast_has_written.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_writer)
            tg.start_soon(fast_writer)
    final = await records.get("t1")
    assert final is not None
    assert (final.step_seq, final.revisions) == (1, 1)
    assert slow_calls == 2  # lost once, retried once


async def _update_async(records: TaskRecords, task_id: str, change) -> TaskState | None:
    """`TaskRecords.update` with an async change function, through `compare_and_set` directly."""
    from bus.records import compare_and_set

    async def raw_change(raw: bytes | None) -> bytes | None:
        state = TaskState.model_validate_json(raw) if raw else None
        return (await change(state)).model_dump_json().encode()

    result = await compare_and_set(records.kv, records.key(task_id), raw_change)
    return TaskState.model_validate_json(result.value) if result.value else None


async def test_creating_a_record_that_exists_keeps_the_first(bus: Bus) -> None:
    """Our contract: the claim of a task (create when absent) happens once, whoever comes second."""
    records = await TaskRecords.open(bus)
    first = await records.update("t2", lambda s: s or _state("t2"))
    second = await records.update("t2", lambda s: s or _state("t2").model_copy(update={"step_seq": 9}))
    assert first == second
    assert [s.task_id for s in await records.all()] == ["t2"]
