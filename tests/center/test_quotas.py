"""Quotas per principal from the configuration center: tasks run until the principal's ledger
reaches its daily tokens, the next submission is refused saying what was used, the limit, when it
resets and the key that raises it, a task crossing the limit is handed off `budget.quota` with its
partial patch, and the ledger equals the tasks' recorded usage, also after NATS restarts (our
contract: docs/configuration.md, "Quotas")."""

import json
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from agents.quotas import LOCAL_PRINCIPAL, Ledger, utc_day
from bus.config import BusConfig
from bus.connection import open_bus
from tests.center.scripted_center import TOKENS_IN, TOKENS_OUT
from tests.center.support import METERED, cli, nats, repo, run_task, serves

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PER_REQUEST = TOKENS_IN + TOKENS_OUT
PER_TASK = 4 * PER_REQUEST  # the plan, two writes, the answer
LIMIT = 2 * PER_TASK + 2 * PER_REQUEST  # two whole tasks, then the third crosses it in its coder step


def _tokens(result) -> int:
    return result.usage["input_tokens"] + result.usage["output_tokens"]


async def test_tokens_per_day_stops_tasks_and_the_ledger_is_exact(tmp_path: Path) -> None:
    work = repo(tmp_path)
    center = tmp_path / "center.toml"
    center.write_text(f'[models]\ndefault = "{METERED}"\n\n[quotas.default]\ntokens_per_day = {LIMIT}\n')
    with anyio.fail_after(500):
        async with nats(tmp_path) as server:
            url = server.url
            assert (await cli("config", "push", str(center), "--nats", url)).code == 0
            async with serves(url, [tmp_path / "a"]), open_bus(BusConfig(servers=(url,))) as bus:
                results = [await run_task(bus, work) for _ in range(3)]
                refused = await cli(
                    "submit", "write the notes", "--repo", str(work), "--mode", "write", "--nats", url
                )
                usage = await cli("usage", "--nats", url, "--json")
            async with open_bus(BusConfig(servers=(url,))) as bus:
                day = await (await Ledger.open(bus)).day(LOCAL_PRINCIPAL, utc_day(datetime.now(UTC)))
            await server.restart()
            async with open_bus(BusConfig(servers=(url,))) as bus:
                after_restart = await (await Ledger.open(bus)).day(
                    LOCAL_PRINCIPAL, utc_day(datetime.now(UTC))
                )

    assert [r.status for r in results[:2]] == ["done", "done"], results[0].report
    crossed = results[2]
    assert (crossed.status, crossed.failure_class) == ("handed_off", "budget.quota"), crossed.report
    assert "quotas.default.tokens_per_day" in crossed.report
    assert crossed.patch is not None and "notes.txt" in crossed.patch  # the partial patch is kept

    assert refused.code == 1
    for expected in (
        "quota.exceeded",
        "tokens_per_day",
        f"of {LIMIT:,}",
        "resets at",
        "quotas.default.tokens_per_day",
    ):
        assert expected in refused.stderr, refused.stderr

    recorded = sum(_tokens(r) for r in results)
    assert day.tokens == recorded > LIMIT
    assert after_restart == day
    assert {task_id: entry.tokens for task_id, entry in day.tasks.items()} == {
        r.task_id: _tokens(r) for r in results
    }
    assert day.running == []

    shown = json.loads(usage.stdout)
    assert shown["days"][0]["principal"] == LOCAL_PRINCIPAL
    assert shown["days"][0]["tokens"] == recorded and shown["days"][0]["tasks"] == 3
