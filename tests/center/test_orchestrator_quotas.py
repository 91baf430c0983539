"""The orchestrator is the quota's last word: a client that skips the submitting command's check
(any NATS client may publish a task) still gets its task refused when the principal is over
quota, `rejected` with `quota.exceeded`; the tasks that ran name the center's revision and are
counted in the ledger (our contract: docs/configuration.md, "Quotas")."""

from datetime import UTC, datetime

import anyio
import pytest

from agents.client import submit_task, watch_task
from agents.messages import TaskResult, TaskSubmitted
from agents.orchestrator import ECHO, orchestrator_spec
from agents.orchestrator.records import TaskRecords
from agents.quotas import Ledger, utc_day
from agents.roles.echo import echo_spec
from bus.center import CenterRecord, ensure_center, watch_center, write
from bus.connection import Bus
from codeloop.services.center_watch import WatchedCenter
from tests.bus._bus_support import running

pytestmark = pytest.mark.anyio
CENTER = "[quotas.default]\ntasks_per_day = 5\n\n[quotas.carol]\ntasks_per_day = 2\n"


async def _result(bus: Bus, task: TaskSubmitted) -> TaskResult:
    envelope, _ = await submit_task(bus, task)
    with anyio.fail_after(20):
        final = await watch_task(bus, envelope.task_id, lambda e: None)
    assert final is not None
    return TaskResult.model_validate(final.payload)


async def test_a_task_past_its_principals_quota_is_rejected_by_the_orchestrator(bus: Bus) -> None:
    record = CenterRecord(document=CENTER, pushed_by="test", pushed_at=datetime.now(UTC))
    revision = await write(bus, await ensure_center(bus), record)
    ledger = await Ledger.open(bus)
    async with watch_center(bus) as watch:
        spec = orchestrator_spec(
            await TaskRecords.open(bus), pipeline=ECHO, center=WatchedCenter(watch), ledger=ledger
        )
        async with running(bus, spec, echo_spec()):
            results = [
                await _result(bus, TaskSubmitted(text=f"hi {n}", repo="/r", principal="carol"))
                for n in range(3)
            ]
            other = await _result(bus, TaskSubmitted(text="hi", repo="/r", principal="dave"))
    assert [(r.status, r.config_revision) for r in results[:2]] == [("done", revision)] * 2
    third = results[2]
    assert (third.status, third.failure_class) == ("rejected", "quota.exceeded")
    assert "tasks_per_day: 2 used of 2" in third.report and "quotas.carol.tasks_per_day" in third.report
    assert other.status == "done"  # another principal, under quotas.default
    day = await ledger.day("carol", utc_day(datetime.now(UTC)))
    assert sorted(day.tasks) == sorted(r.task_id for r in results[:2]) and day.running == []
