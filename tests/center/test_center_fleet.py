"""The configuration center on a fleet: two `serve` processes on one nats-server pick up every push
without a restart, tasks name the revision they ran under, and pushes are checked, versioned and
compare-and-set (our contract: docs/configuration.md, "The configuration center")."""

import json
from pathlib import Path

import anyio
import pytest

from agents.orchestrator.records import TaskRecords
from bus.center import center_bucket, history
from bus.config import BusConfig
from bus.connection import open_bus
from tests.center.support import METERED, cli, codeloop, nats, repo, run_task, serve_process, serves

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REVISION_1 = f'[models]\ndefault = "{METERED}"\n'
REVISION_2 = REVISION_1 + "\n[budgets]\nmax_steps = 2\n"


async def test_pushes_reach_every_worker_and_tasks_name_their_revision(tmp_path: Path) -> None:
    """Issue acceptance: push 1 (a scripted model), push 2 (max_steps = 2), roll back to 1; each
    next task runs under the newest revision on either serve, and history lists the three."""
    work = repo(tmp_path)
    (tmp_path / "r1.toml").write_text(REVISION_1)
    (tmp_path / "r2.toml").write_text(REVISION_2)
    with anyio.fail_after(400):
        async with (
            nats(tmp_path) as server,
            serves(server.url, [tmp_path / "a"]),
            serve_process(server.url, tmp_path / "b"),
        ):
            url = server.url
            pushed = await cli(
                "config", "push", str(tmp_path / "r1.toml"), "--nats", url, "-m", "scripted model"
            )
            assert pushed.code == 0, pushed.stderr
            assert "pushed revision 1" in pushed.stdout
            async with open_bus(BusConfig(servers=(url,))) as bus:
                first = [await run_task(bus, work) for _ in range(2)]
                assert [r.config_revision for r in first] == [1, 1]
                assert [r.status for r in first] == ["done", "done"], first[0].report
                assert all(
                    r.steps == 4 for r in first
                )  # the center's scripted model ran: plan + 3 coder requests

                pushed = await cli(
                    "config", "push", str(tmp_path / "r2.toml"), "--nats", url, "-m", "two steps"
                )
                assert pushed.code == 0, pushed.stderr
                assert "budgets.max_steps" in pushed.stdout
                second = [await run_task(bus, work) for _ in range(2)]
                assert [r.config_revision for r in second] == [2, 2]
                assert [(r.status, r.failure_class, r.steps) for r in second] == [
                    ("handed_off", "budget.steps", 2)
                ] * 2

                back = await cli("config", "rollback", "1", "--nats", url)
                assert back.code == 0, back.stderr
                assert "revision 3 restores revision 1" in back.stdout
                third = await run_task(bus, work)
                assert (third.config_revision, third.status, third.steps) == (3, "done", 4)
                record = await (await TaskRecords.open(bus)).get(third.task_id)
                assert record is not None and record.config_revision == 3
                assert record.task.budgets.max_steps == 30  # the default again
                traced = await cli("trace", third.task_id, "--nats", url, "--json")
                assert traced.code == 0, traced.stderr
                assert json.loads(traced.stdout)["configuration"]["config_revision"] == 3

                listed = await cli("config", "history", "--nats", url, "--json")
                rows = json.loads(listed.stdout)["revisions"]
                assert [(r["revision"], r["message"], r["action"]) for r in rows] == [
                    (1, "scripted model", "push"),
                    (2, "two steps", "push"),
                    (3, "rollback to revision 1", "rollback"),
                ]
                assert rows[1]["keys_changed"] == ["budgets.max_steps"]


async def test_a_misspelt_key_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """Issue acceptance: a push with a misspelt key exits 2 naming it; the history is unchanged."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[budgets]\nmax_stepz = 2\n")
    async with nats(tmp_path) as server:
        done = await cli("config", "push", str(bad), "--nats", server.url)
        assert done.code == 2
        assert "budgets.max_stepz" in done.stderr and "nothing was pushed" in done.stderr
        async with open_bus(BusConfig(servers=(server.url,))) as bus:
            from bus.center import ensure_center

            assert await history(await ensure_center(bus)) == []


async def test_two_pushes_on_one_revision_one_wins_the_other_conflicts(tmp_path: Path) -> None:
    """Issue acceptance: two operators push with the same --expect-revision; one gets the next
    revision, the other a conflict error (exit 1) naming the revision the center is at."""
    (tmp_path / "base.toml").write_text("[budgets]\nmax_steps = 10\n")
    (tmp_path / "x.toml").write_text("[budgets]\nmax_steps = 11\n")
    (tmp_path / "y.toml").write_text("[budgets]\nmax_steps = 12\n")
    results = {}
    async with nats(tmp_path) as server:
        url = server.url
        base = await cli("config", "push", str(tmp_path / "base.toml"), "--nats", url)
        assert base.code == 0, base.stderr

        async def push(name: str) -> None:
            results[name] = await codeloop(
                "config",
                "push",
                str(tmp_path / f"{name}.toml"),
                "--nats",
                url,
                "--expect-revision",
                "1",
                home=tmp_path / f"h-{name}",
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(push, "x")
            tg.start_soon(push, "y")
        async with open_bus(BusConfig(servers=(url,))) as bus:
            revisions = await history(await center_bucket(bus))
    codes = sorted(r.code for r in results.values())
    assert codes == [0, 1], {k: (v.code, v.stderr) for k, v in results.items()}
    loser = next(r for r in results.values() if r.code == 1)
    assert "conflict" in loser.stderr and "revision 2" in loser.stderr
    assert [e.revision for e in revisions] == [1, 2]
