"""What recording costs and what a replay takes, for one small task with an instant scripted model.

Two `serve` stacks run side by side in this process, one with the recorder off
(`serve(record=False)`) and one with it on (the default), each on its own embedded nats-server,
sharing one set of tool servers and one search index (so only the first task pays for loading the
embedding model and indexing; it is printed as such, apart). Then, in each of `--rounds` rounds,
with the two sides taking turns at going first so a noisy machine hurts both alike:

1. the task with the recorder off;
2. the same task with the recorder on: the original run that is then replayed;
3. its replay with the tools run again (`codeloop replay TASK_ID`);
4. its exact replay, no tool executed (`codeloop replay TASK_ID --recorded-tools`).

Printed: the median of each over the rounds, with the last round's outcomes. The model decides
instantly, so every second is plumbing: snapshot, scratch workspaces, MCP sessions, indexing,
the verifier's sandboxed tests.

    .venv/bin/python benchmarks/replay_bench.py [--rounds 3]
"""

import argparse
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from pipeline_bench import SCRIPT, calc_repo  # the same scripted task as the pipeline benchmark

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskResult, TaskSubmitted
from agents.replay.exact import exact_replay
from agents.replay.session import divergences_of, replay_submission
from agents.replay.store import load_runs
from agents.workspace import capture_snapshot
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from codeloop.wiring.embedded import embedded_serve
from codeloop.wiring.process import RoleSetup
from codeloop.wiring.tools import InProcessTools


async def _task(bus, task: TaskSubmitted) -> tuple[TaskResult, float]:
    started = time.perf_counter()
    if task.snapshot is None:
        task = task.model_copy(update={"snapshot": await capture_snapshot(bus, Path(task.repo))})
    envelope, _ = await submit_task(bus, task)
    final = await watch_task(bus, envelope.task_id, lambda e: None)
    return TaskResult.model_validate(final.payload), time.perf_counter() - started


@asynccontextmanager
async def _serving(state: Path, *, record: bool, tools: InProcessTools, home: Path) -> AsyncIterator[Bus]:
    setup = RoleSetup(record=record, tools=tools, home=home)
    async with embedded_serve(
        BusConfig(state_dir=state), join=False, store="state_dir", setup=setup
    ) as serve:
        async with open_bus(serve.config) as bus:
            yield bus


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        tmp_path = Path(tmp)
        script = tmp_path / "decide.py"
        script.write_text(SCRIPT)
        repo = calc_repo(tmp_path / "repo", 0)
        task = TaskSubmitted(
            text="add subtracts",
            repo=str(repo),
            mode="write",
            models=ModelNames(default=f"function:{script}:decide"),
        )
        shared = {"tools": InProcessTools(), "home": tmp_path / "home"}
        seconds: dict[str, list[float]] = {"off": [], "original": [], "replay": [], "exact": []}
        async with (
            _serving(tmp_path / "off", record=False, **shared) as off_bus,
            _serving(tmp_path / "on", record=True, **shared) as on_bus,
        ):
            cold, cold_s = await _task(off_bus, task)
            last: dict[str, Any] = {}  # the latest round's outcomes, printed beside the medians

            async def unrecorded() -> None:
                last["off"], took = await _task(off_bus, task)
                seconds["off"].append(took)

            async def recorded() -> None:
                original, took = await _task(on_bus, task)
                seconds["original"].append(took)
                runs = await load_runs(on_bus, original.task_id)
                replayed, took = await _task(on_bus, await replay_submission(on_bus, original.task_id))
                seconds["replay"].append(took)
                started = time.perf_counter()
                _, exact_divergences = await exact_replay(on_bus, original.task_id)
                seconds["exact"].append(time.perf_counter() - started)
                last.update(
                    original=original,
                    replayed=replayed,
                    runs=len(runs),
                    size=sum(len(r.model_dump_json()) for r in runs),
                    divergences=await divergences_of(on_bus, replayed.task_id),
                    exact_divergences=exact_divergences,
                )

            for number in range(rounds):
                for side in (unrecorded, recorded) if number % 2 == 0 else (recorded, unrecorded):
                    await side()
    median = {name: statistics.median(values) for name, values in seconds.items()}
    off, original, replayed = last["off"], last["original"], last["replayed"]
    same = replayed.patch == original.patch and replayed.verification.verdict == original.verification.verdict
    print(f"one task (write mode, instant scripted model), median of {rounds} interleaved rounds:")
    print(f"  recorder off, cold      {cold_s:7.2f} s   {cold.status} (loads the embedder, builds the index)")
    print(
        f"  recorder off            {median['off']:7.2f} s   {off.status}, verdict {off.verification.verdict}"
    )
    print(
        f"  recorder on (original)  {median['original']:7.2f} s   {original.status}, verdict "
        f"{original.verification.verdict}; {last['runs']} runs recorded, {last['size']} bytes"
    )
    print(
        f"  replay, tools run again {median['replay']:7.2f} s   same patch and verdict: {same}; "
        f"{len(last['divergences'])} divergences"
    )
    print(
        f"  exact replay            {median['exact']:7.2f} s   no tool executed; "
        f"{len(last['exact_divergences'])} divergences"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the four runs")
    anyio.run(main, parser.parse_args().rounds)
