"""What observability costs per task: the pipeline with events, tracing and metrics on beside all
of them off.

Each side is its own child process running a whole `codeloop serve` stack (embedded nats-server,
all roles) — its own process because the OpenTelemetry tracer provider is process-global:

- **on**: every tool call a `tool_call` event (the coder's hooks, the other roles' MCP servers),
  every event naming its step, the Prometheus endpoint with its subscriber counting every event
  and its poller reading the queues, and OpenTelemetry tracing with every span written, as it
  ends, to a JSON-lines trace file (`CODELOOP_TRACE_FILE`: the exporter a local run uses);
- **off**: none of that (`observe=False`, `metrics=None`, no tracer provider). What stays in both
  is the pipeline's own stream: transitions, the orchestrator's plan/retrieval/verification
  events, `model_call` events and the result — the task cannot be followed without them.

The same write-mode task (plan, retrieve, code with a scripted zero-latency model, verify in the
sandbox) runs on both; this process asks each side for one task at a time, alternating which goes
first in each round so a noisy machine hurts both alike. Printed: median and mean seconds per
task, the overhead of "on" over "off", and how many spans the "on" side wrote.

    .venv/bin/python benchmarks/observability_bench.py [--rounds 10]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from pipeline_bench import SCRIPT, calc_repo  # the same scripted task, measured the same way

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskResult, TaskSubmitted
from agents.workspace import capture_snapshot
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.config.environment import telemetry_config
from codeloop.services.metrics import MetricsServing
from codeloop.wiring.embedded import embedded_serve
from codeloop.wiring.process import Hosting, RoleSetup
from codeloop.wiring.telemetry import setup_telemetry


async def one_task(bus, task: TaskSubmitted) -> float:
    started = time.perf_counter()
    task = task.model_copy(update={"snapshot": await capture_snapshot(bus, Path(task.repo))})
    envelope, _ = await submit_task(bus, task)
    final = await watch_task(bus, envelope.task_id, lambda e: None)
    result = TaskResult.model_validate(final.payload)
    assert result.status == "done", result.report
    return time.perf_counter() - started


async def side(state: Path, task: TaskSubmitted, observed: bool, control: int) -> None:
    """A child: one stack; for every `go` line on the `control` pipe runs the task and prints its
    seconds. Not stdin: a process the stack starts may inherit stdin and read a line meant here."""
    if observed:
        assert setup_telemetry(telemetry_config(), process="observability-bench")
    async with embedded_serve(
        BusConfig(state_dir=state),
        join=False,
        store="state_dir",
        setup=RoleSetup(observe=observed),
        hosting=Hosting(metrics=MetricsServing() if observed else None),
    ) as serve:
        assert serve.note is not None and (serve.note.metrics_url is not None) == observed
        async with open_bus(serve.config) as bus:  # with the embedded server's credentials
            await one_task(bus, task)  # untimed: builds this side's index, warms the model
            print("bench: ready", flush=True)
            commands = os.fdopen(control, "r")
            while (await anyio.to_thread.run_sync(commands.readline)).strip() == "go":
                print(f"bench: {await one_task(bus, task):.6f}", flush=True)


class Side:
    """A child process and the write end of its control pipe."""

    def __init__(self, base: Path, name: str, task_file: Path) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("OTEL_EXPORTER_OTLP_ENDPOINT", "CODELOOP_TRACE_FILE")
        }
        if name == "on":
            env["CODELOOP_TRACE_FILE"] = str(base / "spans.jsonl")
        read, write = os.pipe()
        args = [
            sys.executable,
            __file__,
            "--side",
            name,
            "--state",
            str(base / name),
            "--task",
            str(task_file),
            "--control",
            str(read),
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env, pass_fds=(read,))
        os.close(read)
        self.control = os.fdopen(write, "w")

    def close(self) -> None:
        self.control.close()  # the side stops its stack and exits


def reply(side: Side) -> str:
    """The child's next `bench:` line (anything else it prints is passed through)."""
    child = side.process
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("bench: "):
            return line.removeprefix("bench: ").strip()
        sys.stdout.write(line)
    raise SystemExit(f"a side (pid {child.pid}) exited (code {child.wait()}) before answering")


def ask(side: Side) -> float:
    side.control.write("go\n")
    side.control.flush()
    return float(reply(side))


def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="codeloop-observability-bench-") as tmp:
        base = Path(tmp)
        (base / "decide.py").write_text(SCRIPT)
        repo = calc_repo(base / "repo", 0)
        task = TaskSubmitted(
            text="add(2, 3) returns -1",
            repo=str(repo),
            mode="write",
            models=ModelNames(default=f"function:{base / 'decide.py'}:decide"),
        )
        task_file = base / "task.json"
        task_file.write_text(task.model_dump_json())
        children = {name: Side(base, name, task_file) for name in ("on", "off")}
        times: dict[str, list[float]] = {"on": [], "off": []}
        try:
            for name, child in children.items():
                assert reply(child) == "ready"
                print(f"  ({name} side ready)", file=sys.stderr, flush=True)
            for i in range(rounds):
                for name in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    times[name].append(ask(children[name]))
        finally:
            for child in children.values():
                child.close()
            for child in children.values():
                try:
                    child.process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    child.process.kill()
                    child.process.wait()
        spans = base / "spans.jsonl"
        span_count = len(spans.read_text().splitlines()) if spans.exists() else 0
    print(f"observability overhead per task, scripted zero-latency model, {rounds} rounds, interleaved (s)")
    print("  on  = tool_call events (hooks + MCP middleware), step-tagged events, Prometheus metrics,")
    print("        OpenTelemetry spans to a JSON-lines trace file")
    print("  off = none of those (the pipeline's own events and model_call events stay)")
    print(f"  {'':<6} {'median':>8} {'mean':>8} {'min':>8} {'max':>8}")
    for name in ("off", "on"):
        runs = times[name]
        print(
            f"  {name:<6} {statistics.median(runs):8.3f} {statistics.mean(runs):8.3f} {min(runs):8.3f} {max(runs):8.3f}"
        )
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"  overhead of on over off (medians): {on - off:+.3f} s = {100 * (on - off) / off:+.1f}%")
    print(
        f"  spans the 'on' side wrote: {span_count} ({span_count / (rounds + 1):.0f} per task, warm-up included)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--side", choices=("on", "off"), help=argparse.SUPPRESS)
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--task", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--control", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        task = TaskSubmitted.model_validate_json(args.task.read_text())
        anyio.run(side, args.state, task, args.side == "on", args.control)
    else:
        main(args.rounds)
