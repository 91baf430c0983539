"""What observability costs per task: the pipeline with events and metrics on beside all of it off.

Two `codeloop serve` stacks run in this process, each on its own embedded nats-server:

- **on**: every tool call a `tool_call` event (the coder's hooks, the other roles' MCP servers),
  every event naming its step, and the Prometheus endpoint with its subscriber counting every
  event and its poller reading the queues;
- **off**: none of that (`observe=False`, `metrics=None`). What stays in both is the pipeline's
  own stream: transitions, the orchestrator's plan/retrieval/verification events, `model_call`
  events and the result — the task cannot be followed without them.

The same write-mode task (plan, retrieve, code with a scripted zero-latency model, verify in the
sandbox) runs on both, alternating which goes first in each round so a noisy machine hurts both
alike. Printed: median and mean seconds per task, and the overhead of "on" over "off".

Tracing (OpenTelemetry spans) is not in this tree yet: `--tracing` is accepted and does nothing
but say so, and the "on" column is events + metrics only.

    .venv/bin/python benchmarks/observability_bench.py [--rounds 10] [--tracing]
"""

import argparse
import statistics
import tempfile
import time
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
from pipeline_bench import SCRIPT, make_repo  # the same scripted task, measured the same way

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskResult, TaskSubmitted
from agents.workspace import capture_snapshot
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.wiring import MetricsServing, serve


@asynccontextmanager
async def stack(state: Path, *, observed: bool):
    """A whole serve (embedded NATS, all roles) and a client bus to it."""
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        note = await tg.start(lambda task_status: serve(
            BusConfig(state_dir=state), stop=stop, task_status=task_status, observe=observed,
            metrics=MetricsServing() if observed else None,
        ))  # fmt: skip
        assert (note.metrics_url is not None) == observed
        client = BusConfig(state_dir=state, servers=tuple(note.nats_url.split(",")))
        async with open_bus(client) as bus:
            yield bus
        stop.set()


async def one_task(bus, task: TaskSubmitted) -> float:
    started = time.perf_counter()
    task = task.model_copy(update={"snapshot": await capture_snapshot(bus, Path(task.repo))})
    envelope, _ = await submit_task(bus, task)
    final = await watch_task(bus, envelope.task_id, lambda e: None)
    result = TaskResult.model_validate(final.payload)
    assert result.status == "done", result.report
    return time.perf_counter() - started


async def main(rounds: int, tracing: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="codeloop-observability-bench-") as tmp:
        base = Path(tmp)
        (base / "decide.py").write_text(SCRIPT)
        repo = make_repo(base / "repo", 0)
        task = TaskSubmitted(text="add(2, 3) returns -1", repo=str(repo), mode="write",
                             models=ModelNames(default=f"function:{base / 'decide.py'}:decide"))  # fmt: skip
        times: dict[str, list[float]] = {"on": [], "off": []}
        async with AsyncExitStack() as exit_stack:
            buses = {
                "on": await exit_stack.enter_async_context(stack(base / "on", observed=True)),
                "off": await exit_stack.enter_async_context(stack(base / "off", observed=False)),
            }
            for bus in buses.values():  # untimed: builds each side's index, warms the model
                await one_task(bus, task)
            for i in range(rounds):
                order = ("on", "off") if i % 2 == 0 else ("off", "on")
                for name in order:
                    times[name].append(await one_task(buses[name], task))
    print(f"observability overhead per task, scripted zero-latency model, {rounds} rounds, interleaved (s)")
    print("  on  = tool_call events (hooks + MCP middleware), step-tagged events, Prometheus metrics")
    print("  off = none of those (the pipeline's own events and model_call events stay)")
    if tracing:
        print("  --tracing: OpenTelemetry tracing is not in this tree yet; nothing was traced in either column")
    else:
        print("  tracing: not measured (not in this tree yet; --tracing is the hook for it)")
    print(f"  {'':<6} {'median':>8} {'mean':>8} {'min':>8} {'max':>8}")
    for name in ("off", "on"):
        runs = times[name]
        print(f"  {name:<6} {statistics.median(runs):8.3f} {statistics.mean(runs):8.3f} {min(runs):8.3f} {max(runs):8.3f}")
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"  overhead of on over off (medians): {on - off:+.3f} s = {100 * (on - off) / off:+.1f}%")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tracing", action="store_true", help="Also trace the 'on' side (not in this tree yet).")
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.tracing)
