"""What the tasks server adds to a task, beside the way `codeloop run` follows one.

One embedded serve (every role in this process, an instantly deciding scripted model), and the
tasks server over streamable HTTP on its bus with a real MCP client. Over rounds, interleaved so
a noisy machine hurts both alike, the same write-mode task runs two ways:

1. as `codeloop run` does against a running serve: capture the tree, submit, follow the task's
   events until its result;
2. through the tasks server: `submit_task`, then `wait_task` with a progress token until the
   view has its result.

Printed per way: the time end to end (median and range); for the tasks server also the time from
`submit_task` being sent to the first progress notification, and how long after the task's result
event reached the bus (seen by a watcher in this process) `wait_task` returned. The last column is
what the tasks server adds end to end (target: under 0.5 s).

    .venv/bin/python benchmarks/tasks_server_bench.py [--rounds 5]
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# The same task and scripted model as pipeline_bench.py, so the two benches' figures compare.
from pipeline_bench import SCRIPT, calc_repo

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskSubmitted
from agents.workspace import capture_snapshot
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.services.tasks_backend import BusTasks
from codeloop.wiring.embedded import embedded_serve
from codeloop.wiring.process import Hosting
from tool_servers.protocol.http import TokenGrant, TokenTable, serve_http
from tool_servers.protocol.scopes import ALL_SCOPES
from tool_servers.protocol.spec import ServerOptions
from tool_servers.tasks.server import build_tasks_server

TOKEN = "bench-token-0123456789abcdef"


async def like_run(bus, task: TaskSubmitted) -> float:
    started = time.perf_counter()
    task = task.model_copy(update={"snapshot": await capture_snapshot(bus, Path(task.repo))})
    envelope, _ = await submit_task(bus, task)
    final = await watch_task(bus, envelope.task_id, lambda e: None)
    assert final.payload["status"] == "done", final.payload.get("report")
    return time.perf_counter() - started


async def through_tasks_server(bus, client: Client, model: str) -> tuple[float, float, float]:
    """(end to end, to the first progress notification, wait_task's return after the result event)."""
    first_progress: list[float] = []
    result_seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        first_progress.append(time.perf_counter())

    started = time.perf_counter()
    submitted = await client.call_tool(
        "submit_task", {"task": "add(2, 3) returns -1", "repo": "repo", "mode": "write", "model": model}
    )
    assert not submitted.is_error, submitted.content
    task_id = (submitted.structured_content or {})["task_id"]
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            def on_event(envelope) -> None:
                if envelope.kind == "task_result":
                    result_seen.append(time.perf_counter())

            await watch_task(bus, task_id, on_event)

        tg.start_soon(watch)
        while True:
            waited = await client.call_tool(
                "wait_task", {"task_id": task_id, "timeout_s": 120}, progress_callback=on_progress
            )
            if (waited.structured_content or {}).get("result") is not None:
                break
        ended = time.perf_counter()
    assert waited.structured_content["status"] == "done", waited.structured_content["result"]["report"]
    return ended - started, first_progress[0] - started, ended - result_seen[0]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} s  ({min(values):.3f}-{max(values):.3f})"


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tasks-bench-") as tmp:
        root = Path(tmp) / "root"
        calc_repo(root / "repo", 0)
        script = Path(tmp) / "model.py"
        script.write_text(SCRIPT)
        model = f"function:{script}:decide"
        config = BusConfig(state_dir=Path(tmp) / "state")
        hosting = Hosting(metrics=None)
        async with embedded_serve(config, join=False, store="state_dir", hosting=hosting) as serve:
            async with open_bus(serve.config) as bus:
                tokens = TokenTable({TOKEN: TokenGrant("bench", ALL_SCOPES)})
                options = ServerOptions(token_verifier=tokens)
                server = build_tasks_server(root, options, await BusTasks.open(bus))  # pyright: ignore[reportArgumentType] - BusTasks.changes is an async generator function, which the protocol's iterator describes
                async with anyio.create_task_group() as http_tg:
                    url = await http_tg.start(lambda task_status: serve_http(server, task_status=task_status))
                    headers = {"Authorization": f"Bearer {TOKEN}"}
                    async with (
                        create_mcp_http_client(headers=headers) as http,
                        Client(streamable_http_client(url, http_client=http)) as client,
                    ):
                        task = TaskSubmitted(
                            text="add(2, 3) returns -1",
                            repo=str(root / "repo"),
                            mode="write",
                            models=ModelNames(default=model),
                        )
                        await like_run(bus, task)  # warm-up: the index, the sandbox, the model file
                        run_s, server_s, first_s, after_s = [], [], [], []
                        for _ in range(rounds):
                            run_s.append(await like_run(bus, task))
                            total, first, after = await through_tasks_server(bus, client, model)
                            server_s.append(total)
                            first_s.append(first)
                            after_s.append(after)
                    http_tg.cancel_scope.cancel()
    print(f"tasks server beside codeloop run's way of following a task, {rounds} rounds, one write-mode task")
    print(f"  codeloop run (submit + watch)        {spread(run_s)}")
    print(f"  tasks server (submit_task + wait)    {spread(server_s)}")
    print(f"    to the first progress notification {spread(first_s)}")
    print(f"    wait_task after the result event   {spread(after_s)}")
    added = statistics.median(server_s) - statistics.median(run_s)
    print(f"  added end to end (median)            {added:7.3f} s  (target < 0.5 s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    anyio.run(main, parser.parse_args().rounds)
