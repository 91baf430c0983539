"""Throughput with W workers per role on one machine, nothing shared but the bus; and the same under faults.

    .venv/bin/python benchmarks/scale_bench.py [--tasks 60] [--workers 1,2,4] [--model-delay 0.3] [--json]
    .venv/bin/python benchmarks/scale_bench.py --faults [--tasks 100] [--workers 2] [--json]

Starts the 3-node JetStream cluster (`tests/support/cluster.py`: the cluster of
`infra/nats/n{1,2,3}.conf` on free loopback ports, streams at 3 replicas), an orchestrator and,
for each W in `--workers`, W `codeloop serve --role R` processes per role (planner, retriever,
coder, verifier), each with its own CODELOOP_HOME and, when run as root, as uid 65534, which
cannot read the repository (mode 0700): the workers have only the snapshot. The model is
`examples/models/scripted.py:slow`, which sleeps `--model-delay` s before each decision (an LLM's
latency), then fixes the bug from what the tools returned. Each W first runs W warm-up tasks
(every new worker loads the embedder once), then `--tasks` tasks submitted at once.

Per W it prints what that run measured: tasks per minute (the tasks over the time from the first
submission to the last result), its ratio to the first W, p50/p95 time per task (submission to
result, so it includes waiting for a free worker), where a task's time went (from its events:
model calls, tool calls, and the hand-offs: from the orchestrator dispatching a step to the
worker's first call and from its last call to the orchestrator's next event, i.e. bus delivery,
waiting for a free worker and the workspace's set-up from the object store), and the machine's
CPU use during the run (/proc/stat, all cores) beside the share of it our processes used.

`--faults`: one W (the first of `--workers`), `--tasks` (default 100) tasks; while they run one
NATS node is SIGKILLed and restarted, and one worker of each role (the orchestrator too) is
SIGKILLed and replaced. At the end: tasks lost (no terminal status), tasks not done, results
doubled (a task with more than one result event), steps applied twice (a step id twice in the
task's record), and patches that do not apply exactly once to a fresh copy of the repository.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402

from agents.client import submit_task  # noqa: E402
from agents.messages import TaskSubmitted  # noqa: E402
from agents.orchestrator.records import TaskRecords  # noqa: E402
from bus.config import BusConfig  # noqa: E402
from bus.connection import Bus, open_bus  # noqa: E402
from bus.envelope import Envelope  # noqa: E402
from tests.support.cluster import ROLES, Cluster, open_cluster  # noqa: E402
from tests.support.scale_faults import (  # noqa: E402
    calc_repo,
    events_of,
    faults,
    retrying,
    slow_fix_task,
    wait_terminal,
)

WORKER_EVENTS = ("model_call", "tool_call")


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def process_jiffies(pids: list[int]) -> int:
    """utime+stime of `pids` and their reaped children (the sandboxes' commands)."""
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in stat[11:15])
    return total


def our_pids(cluster: Cluster) -> list[int]:
    return [w.process.pid for w in cluster.workers if w.process.returncode is None] + [
        n.pid for n in cluster.nodes if n.running
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def breakdown(events: list[Envelope]) -> dict[str, float]:
    """Seconds of one task in model calls, tool calls and hand-offs, and its total."""
    model = tools = handoff = 0.0
    start = events[0].sent_at.timestamp()
    end = events[-1].sent_at.timestamp()
    dispatched: float | None = None
    last_worker_end: float | None = None
    for envelope in events:
        at = envelope.sent_at.timestamp()
        payload = envelope.payload
        name = payload.get("name")
        data = payload.get("data") or {}
        if name in WORKER_EVENTS:
            took = data.get("latency_s") if name == "model_call" else (data.get("duration_ms") or 0) / 1000
            took = float(took or 0.0)
            if name == "model_call":
                model += took
            else:
                tools += took
            if dispatched is not None:
                handoff += max(0.0, at - took - dispatched)
                dispatched = None
            last_worker_end = at
        else:  # an orchestrator's event: the end of a step's hand-off back, maybe the next dispatch
            if last_worker_end is not None:
                handoff += max(0.0, at - last_worker_end)
                last_worker_end = None
            if name == "transition" and data.get("role") in ROLES:
                dispatched = at
    return {"total": end - start, "model": model, "tools": tools, "handoff": handoff}


async def submit_batch(bus: Bus, task: TaskSubmitted, prefix: str, count: int) -> list[str]:
    ids = [f"{prefix}-{i:04d}" for i in range(count)]
    for task_id in ids:
        await retrying(submit_task, bus, task, task_id=task_id)
    return ids


async def run_w(cluster: Cluster, bus: Bus, task: TaskSubmitted, w: int, tasks: int) -> dict:
    await cluster.scale(w)
    records = await TaskRecords.open(bus)
    warm = await submit_batch(bus, task, f"warm-w{w}", w)
    await wait_terminal(records, warm, 600)
    busy0, total0 = cpu_jiffies()
    ours0 = process_jiffies(our_pids(cluster))
    started = time.monotonic()
    ids = await submit_batch(bus, task, f"w{w}", tasks)
    final = await wait_terminal(records, ids, 1800)
    elapsed = time.monotonic() - started
    busy1, total1 = cpu_jiffies()
    ours1 = process_jiffies(our_pids(cluster))
    parts = [breakdown(events) for events in [await events_of(bus, i) for i in ids] if events]
    totals = [p["total"] for p in parts]
    spent = sum(totals) or 1.0
    cores = os.cpu_count() or 1
    done = sum(1 for s in final.values() if s.status == "done")  # type: ignore[attr-defined] - final holds TaskState values, read back untyped from the bus
    return {
        "workers_per_role": w,
        "tasks": tasks,
        "done": done,
        "seconds": round(elapsed, 2),
        "tasks_per_min": round(60 * len(final) / elapsed, 2),
        "p50_s": round(percentile(totals, 0.5), 2),
        "p95_s": round(percentile(totals, 0.95), 2),
        "share_model": round(sum(p["model"] for p in parts) / spent, 3),
        "share_tools": round(sum(p["tools"] for p in parts) / spent, 3),
        "share_handoff": round(sum(p["handoff"] for p in parts) / spent, 3),
        "machine_cpu": round((busy1 - busy0) / max(1, total1 - total0), 3),
        "ours_cpu": round((ours1 - ours0) / max(1, total1 - total0), 3),
        "cores": cores,
    }


async def bench(args: argparse.Namespace, base: Path) -> list[dict]:
    repo = calc_repo(base / "repo")
    rows: list[dict] = []
    async with open_cluster(
        base / "cluster",
        model_delay_s=args.model_delay,
        workspaces=args.workspace_service,
        concurrency=args.worker_concurrency,
    ) as cluster:
        config = BusConfig(
            servers=tuple(n.url for n in cluster.nodes), replicas=3, state_dir=base / "submitter"
        )
        async with open_bus(config) as bus:
            task = await slow_fix_task(bus, repo)
            for w in args.workers:
                row = await run_w(cluster, bus, task, w, args.tasks)
                row["ratio_to_first"] = (
                    round(row["tasks_per_min"] / rows[0]["tasks_per_min"], 2) if rows else 1.0
                )
                rows.append(row)
                if not args.json:
                    print_row(row)
    return rows


def print_row(row: dict) -> None:
    print(
        f"W={row['workers_per_role']}: {row['done']}/{row['tasks']} done in {row['seconds']:.1f} s, "
        f"{row['tasks_per_min']:.1f} tasks/min (x{row['ratio_to_first']:.2f}), per task p50 {row['p50_s']:.1f} s "
        f"p95 {row['p95_s']:.1f} s; task time: model {row['share_model']:.0%}, tools {row['share_tools']:.0%}, "
        f"hand-offs {row['share_handoff']:.0%}; CPU {row['machine_cpu']:.0%} of {row['cores']} cores "
        f"(ours {row['ours_cpu']:.0%})",
        flush=True,
    )


async def main(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="codeloop-scale-bench-"))
    os.chmod(base, 0o755)  # the workers' homes are under it
    try:
        if args.faults:
            report = await faults(args, base)
            if args.json:
                print(json.dumps(report))
            else:
                for key, value in report.items():
                    print(f"{key:28} {value}")
        else:
            rows = await bench(args, base)
            if args.json:
                print(json.dumps(rows))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tasks", type=int, default=None, help="tasks per W (default 60; 100 with --faults)")
    parser.add_argument("--workers", default="1,2,4", help="workers per role to measure, comma-separated")
    parser.add_argument(
        "--model-delay", type=float, default=0.3, help="seconds the scripted model takes per request"
    )
    parser.add_argument("--faults", action="store_true", help="the fault run instead (first W only)")
    parser.add_argument(
        "--worker-concurrency",
        type=int,
        default=None,
        help="requests each worker handles at once (serve --concurrency; default 64): a pod's fixed share",
    )
    parser.add_argument(
        "--workspace-service",
        action="store_true",
        help="also start the workspace service; the coder and verifier workers work only through it",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=1200.0, help="--faults: give up waiting after this"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parsed = parser.parse_args()
    parsed.workers = [int(w) for w in parsed.workers.split(",")]
    if parsed.tasks is None:
        parsed.tasks = 100 if parsed.faults else 60
    if parsed.tasks < 1 or any(w < 1 for w in parsed.workers):
        parser.error("--tasks and every --workers count must be at least 1")
    anyio.run(main, parsed)
