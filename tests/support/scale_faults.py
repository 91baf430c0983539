"""The cluster under faults, for `tests/scale/test_faults.py` and `benchmarks/scale_bench.py --faults`.

While tasks run on the cluster of `tests.support.cluster`, one NATS node is SIGKILLed and
restarted, and one worker of each role (the orchestrator too) is SIGKILLed and replaced. `faults`
reports tasks lost (no terminal status), not done, results doubled (more than one result event),
steps applied twice (a step id twice in the record), and patches that do not apply exactly once to
a fresh copy of the repository. The helpers (`retrying`, `wait_terminal`, `events_of`) are the
benchmark's too.
"""

import argparse
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import anyio

from agents.client import submit_task, watch_task
from agents.messages import TERMINAL_STATUSES, ModelNames, TaskSubmitted
from agents.orchestrator.records import TaskRecords
from agents.workspace import capture_snapshot
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.envelope import Envelope
from bus.errors import BusError
from codeloop.testing import make_repo
from tests.support.cluster import ROLES, open_cluster, slow_model

TASK = "add(2, 3) returns -1: replace `a - b` with `a + b` in `calc/__init__.py`"


async def slow_fix_task(bus: Bus, repo: Path) -> TaskSubmitted:
    """`TASK` on `repo` (a `calc_repo`) in write mode for the slow scripted model, its snapshot
    captured on `bus`: the task every scale test and benchmark submits."""
    return TaskSubmitted(
        text=TASK,
        repo=str(repo),
        mode="write",
        models=ModelNames(default=slow_model()),
        snapshot=await capture_snapshot(bus, repo),
    )


CALC = {
    "calc/__init__.py": '"""Tiny arithmetic."""\n\n\ndef add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n',
    "tests/test_calc.py": "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n",
    "README.md": "# calc\n\nSmall arithmetic helpers.\n",
}


def calc_repo(root: Path) -> Path:
    """The task's repository, closed to the workers' user (mode 0700): they have only the snapshot."""
    make_repo(root, CALC).chmod(0o700)
    return root


async def retrying(call, *args, **kwargs):
    with anyio.fail_after(120):
        while True:
            try:
                return await call(*args, **kwargs)
            except BusError:
                await anyio.sleep(0.5)  # a node is down: the cluster elects another leader


async def events_of(bus: Bus, task_id: str) -> list[Envelope]:
    seen: list[Envelope] = []
    with anyio.move_on_after(30):
        await watch_task(bus, task_id, seen.append)
    return seen


async def wait_terminal(records: TaskRecords, ids: list[str], timeout_s: float) -> dict[str, object]:
    """The final state of each id that reached a terminal status within `timeout_s`."""
    final: dict[str, object] = {}
    with anyio.move_on_after(timeout_s):
        while len(final) < len(ids):
            for task_id in ids:
                if task_id not in final:
                    state = await retrying(records.get, task_id)
                    if state is not None and state.status in TERMINAL_STATUSES:
                        final[task_id] = state
            await anyio.sleep(0.5)
    return final


async def faults(args: argparse.Namespace, base: Path) -> dict:
    repo = calc_repo(base / "repo")
    w = args.workers[0]
    injected: list[str] = []
    async with open_cluster(
        base / "cluster",
        model_delay_s=args.model_delay,
        ack_wait_s=10,
        workspaces=args.workspace_service,
        concurrency=args.worker_concurrency,
    ) as cluster:
        config = BusConfig(
            servers=tuple(n.url for n in cluster.nodes),
            replicas=3,
            state_dir=base / "submitter",
            reconnect_attempts=600,
        )
        async with open_bus(config) as bus:
            task = await slow_fix_task(bus, repo)
            await cluster.scale(w)
            records = await TaskRecords.open(bus)
            started = time.monotonic()
            ids = [f"fault-{i:04d}" for i in range(args.tasks)]

            async def progress() -> int:
                ended = 0
                for task_id in ids:
                    state = await retrying(records.get, task_id)
                    ended += state is not None and state.status in TERMINAL_STATUSES
                return ended

            async def reached(count: int) -> None:
                """Polled: the records are read as a client would, the run's own progress."""
                while await progress() < count:  # noqa: ASYNC110 - other processes move it
                    await anyio.sleep(1)

            async def inject() -> None:
                await reached(args.tasks // 5)
                node = cluster.nodes[1]
                node.process.send_signal(signal.SIGKILL)
                injected.append(f"nats node {node.name} SIGKILLed at {time.monotonic() - started:.0f} s")
                await anyio.sleep(5)
                await node.restart(timeout_s=60)
                injected.append(f"nats node {node.name} restarted at {time.monotonic() - started:.0f} s")
                await reached(args.tasks * 2 // 5)
                for role in ("orchestrator", *ROLES):
                    # The one most likely to hold a message: the oldest live worker of the role.
                    victim = cluster.live(role)[0]
                    await cluster.kill(victim)
                    injected.append(f"{role} worker SIGKILLed at {time.monotonic() - started:.0f} s")
                    await cluster.start(role)
                all_injected.set()

            all_injected = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(inject)
                for task_id in ids:
                    await retrying(submit_task, bus, task, task_id=task_id)
                with anyio.move_on_after(args.max_seconds):
                    await all_injected.wait()  # every fault, even if the tasks outran them
                final = await wait_terminal(records, ids, args.max_seconds)
                tg.cancel_scope.cancel()
            elapsed = time.monotonic() - started
            results: Counter[str] = Counter()
            for task_id in ids:
                events = await events_of(bus, task_id)
                results[task_id] = sum(1 for e in events if e.kind == "task_result")
            patches = {i: s.result.patch for i, s in final.items() if s.status == "done"}  # type: ignore[attr-defined] - final holds TaskState values, read back untyped from the bus
            why = Counter(
                f"{s.status} {s.result.failure_class}: {s.result.report[:160]}"  # type: ignore[attr-defined] - final holds TaskState values, read back untyped from the bus
                for s in final.values()
                if s.status != "done" and s.result is not None  # type: ignore[attr-defined] - final holds TaskState values, read back untyped from the bus
            )
            steps_twice = {
                i: [step for step, n in Counter(s.steps_done).items() if n > 1]  # type: ignore[attr-defined] - final holds TaskState values, read back untyped from the bus
                for i, s in final.items()
            }
    bad_patches = await anyio.to_thread.run_sync(patches_applying_once, repo, patches, base / "apply")
    lost = [i for i in ids if i not in final]
    not_done = [i for i, s in final.items() if s.status != "done"]  # type: ignore[attr-defined] - final holds TaskState values, read back untyped from the bus
    return {
        "tasks": args.tasks,
        "workers_per_role": w,
        "seconds": round(elapsed, 1),
        "lost": len(lost),
        "not_done": len(not_done),
        "done": args.tasks - len(lost) - len(not_done),
        "results_doubled": sum(1 for n in results.values() if n > 1),
        "steps_applied_twice": sum(1 for steps in steps_twice.values() if steps),
        "patches_not_applying_once": len(bad_patches),
        "faults": injected,
        "why_not_done": dict(why.most_common(5)),
        "examples": {"lost": lost[:5], "not_done": not_done[:5], "bad_patches": bad_patches[:5]},
    }


def patches_applying_once(repo: Path, patches: dict[str, str | None], scratch: Path) -> list[str]:
    """Task ids whose patch does not apply to a fresh copy of the original tree, or applies a
    second time on top of itself (a change made twice would show as a doubled hunk or a patch
    that is not the one fix)."""
    bad = []
    for task_id, patch in patches.items():
        copy = scratch / task_id
        shutil.copytree(repo, copy, symlinks=True)
        once = subprocess.run(
            ["git", "apply", "-"], cwd=copy, input=patch or "", text=True, capture_output=True
        )
        twice = subprocess.run(
            ["git", "apply", "--check", "-"], cwd=copy, input=patch or "", text=True, capture_output=True
        )
        fixed = "return a + b" in (copy / "calc" / "__init__.py").read_text()
        if not patch or once.returncode != 0 or twice.returncode == 0 or not fixed:
            bad.append(task_id)
        shutil.rmtree(copy)
    return bad
