"""Two workers of a plug-in role in two processes share its work, and SIGKILL of one mid-review
loses nothing: its message goes to the other worker after the ack wait."""

import signal
from pathlib import Path

import anyio
import pytest

from tests.roles.workers import auth_of, client_bus, serving

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
PIPELINE = ["code:scripted-coder", "review:slow-reviewer"]
TASKS = 10


async def _stats(bus, role: str) -> dict[str, dict]:
    from bus.discovery import discover

    return {w.id: w.as_json() for w in await discover(bus) if w.role == role}


async def test_two_workers_of_a_plug_in_role_share_ten_tasks_and_a_killed_one_loses_nothing(
    fixture_roles_installed, tmp_path: Path
) -> None:
    from agents.client import submit_task, watch_task
    from agents.messages import PipelineChoice, TaskResult, TaskSubmitted

    home = tmp_path / "main"
    repo = tmp_path / "repo"  # apart from the serves' homes, whose bus stores change under a capture
    repo.mkdir()
    (repo / "app.py").write_text("x = 1\n")
    main_args = ("--role", "orchestrator", "--role", "scripted-coder", "--ack-wait", "2")
    async with serving(home, *main_args) as (_, note), client_bus(home, note) as bus:
        auth = auth_of(home)
        join = ("--role", "slow-reviewer", "--nats", note["nats_url"], "--ack-wait", "2")
        async with (
            serving(tmp_path / "w1", *join, auth=auth) as (one, _),
            serving(tmp_path / "w2", *join, auth=auth) as (two, _),
        ):
            processes = {one.pid: one, two.pid: two}
            choice = PipelineChoice(name="shared", stages=PIPELINE)
            ids = []
            for i in range(TASKS):
                task = TaskSubmitted(text=f"task {i}\nreview-delay: 1.0", repo=str(repo), pipeline=choice)
                ids.append((await submit_task(bus, task))[0].task_id)
            # Both workers take reviews (each one at a time); then one dies holding one, after it
            # finished at least one.
            with anyio.fail_after(60):
                while True:
                    stats = await _stats(bus, "slow-reviewer")
                    if len(stats) == 2 and all(w["requests"] >= 1 for w in stats.values()):
                        busy = [w for w in stats.values() if w["in_flight"] == 1 and w["requests"] >= 2]
                        if busy:
                            break
                    await anyio.sleep(0.2)
            victim = processes[busy[0]["pid"]]
            assert {w["pid"] for w in stats.values()} == set(processes)
            victim.send_signal(signal.SIGKILL)
            await victim.wait()

            results = []
            with anyio.fail_after(120):
                for task_id in ids:
                    final = await watch_task(bus, task_id, lambda e: None)
                    results.append(TaskResult.model_validate(final.payload))
            assert [r.status for r in results] == ["done"] * TASKS
            assert all([rv.verdict for rv in r.reviews] == ["approve"] for r in results)
            reviewers = {int(r.reviews[0].feedback.removeprefix("approved by pid ")) for r in results}
            assert reviewers == set(processes)  # each process approved some of the ten
            # Only the survivor is still discoverable.
            assert len(await _stats(bus, "slow-reviewer")) == 1
