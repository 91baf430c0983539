"""What recording costs and what a replay takes, for one small task with an instant scripted model.

One run of each, on embedded nats-servers with every role in this process, sharing one set of tool
servers and one search index (so only the first task pays for loading the embedding model and
indexing; it is printed as such):

0. the task with the recorder off, cold caches,
1. the task again with the recorder off (`serve(record=False)`),
2. the same task with the recorder on (the default): the original run that is then replayed,
3. its replay with the tools run again (`codeloop replay TASK_ID`),
4. its exact replay, no tool executed (`codeloop replay TASK_ID --recorded-tools`).

The model decides instantly, so every second is plumbing: snapshot, scratch workspaces, MCP
sessions, indexing, the verifier's sandboxed tests. One run each: a noisy machine moves these
figures; run it again before trusting a small difference.

    .venv/bin/python benchmarks/replay_bench.py
"""

import tempfile
import time
from pathlib import Path

import anyio
from pipeline_bench import SCRIPT, make_repo  # the same scripted task as the pipeline benchmark

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskResult, TaskSubmitted
from agents.replay.exact import exact_replay
from agents.replay.session import divergences_of, replay_submission
from agents.replay.store import load_runs
from agents.workspace import capture_snapshot
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.config import client_config_for
from codeloop.tool_provider import InProcessTools
from codeloop.wiring import serve


async def _task(bus, task: TaskSubmitted) -> tuple[TaskResult, float]:
    started = time.perf_counter()
    if task.snapshot is None:
        task = task.model_copy(update={"snapshot": await capture_snapshot(bus, Path(task.repo))})
    envelope, _ = await submit_task(bus, task)
    final = await watch_task(bus, envelope.task_id, lambda e: None)
    return TaskResult.model_validate(final.payload), time.perf_counter() - started


async def _on_serve(state: Path, *, record: bool, body, tools: InProcessTools, home: Path) -> object:
    config = BusConfig(state_dir=state)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        note = await tg.start(
            lambda task_status: serve(
                config, stop=stop, record=record, tools=tools, home=home, task_status=task_status
            )
        )
        try:
            async with open_bus(
                client_config_for(config, note)
            ) as bus:
                return await body(bus)
        finally:
            stop.set()


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        tmp_path = Path(tmp)
        script = tmp_path / "decide.py"
        script.write_text(SCRIPT)
        repo = make_repo(tmp_path / "repo", 0)
        task = TaskSubmitted(text="add subtracts", repo=str(repo), mode="write",
                             models=ModelNames(default=f"function:{script}:decide"))  # fmt: skip

        shared = {"tools": InProcessTools(), "home": tmp_path / "home"}

        async def unrecorded(bus):
            return await _task(bus, task), await _task(bus, task)

        (cold, cold_s), (off, off_s) = await _on_serve(
            tmp_path / "off", record=False, body=unrecorded, **shared
        )

        async def recorded(bus):
            original, original_s = await _task(bus, task)
            runs = await load_runs(bus, original.task_id)
            size = sum(len(r.model_dump_json()) for r in runs)
            replayed, replay_s = await _task(bus, await replay_submission(bus, original.task_id))
            divergences = await divergences_of(bus, replayed.task_id)
            started = time.perf_counter()
            exact, exact_divergences = await exact_replay(bus, original.task_id)
            exact_s = time.perf_counter() - started
            return (
                original,
                original_s,
                size,
                len(runs),
                replayed,
                replay_s,
                divergences,
                exact_s,
                exact_divergences,
            )

        (
            original,
            original_s,
            size,
            runs,
            replayed,
            replay_s,
            divergences,
            exact_s,
            exact_div,
        ) = await _on_serve(tmp_path / "on", record=True, body=recorded, **shared)
    same = replayed.patch == original.patch and replayed.verification.verdict == original.verification.verdict
    print("one task (write mode, instant scripted model), one run of each:")
    print(f"  recorder off, cold      {cold_s:7.2f} s   {cold.status} (loads the embedder, builds the index)")
    print(f"  recorder off            {off_s:7.2f} s   {off.status}, verdict {off.verification.verdict}")
    print(f"  recorder on (original)  {original_s:7.2f} s   {original.status}, verdict "
          f"{original.verification.verdict}; {runs} runs recorded, {size} bytes")  # fmt: skip
    print(f"  replay, tools run again {replay_s:7.2f} s   same patch and verdict: {same}; "
          f"{len(divergences)} divergences")  # fmt: skip
    print(f"  exact replay            {exact_s:7.2f} s   no tool executed; {len(exact_div)} divergences")


if __name__ == "__main__":
    anyio.run(main)
