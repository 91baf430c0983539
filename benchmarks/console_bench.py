"""How fast the web console answers, beside `codeloop status` for the same task.

One embedded serve in this process (the orchestrator and the echo role), its console on a free
port, a headless Chromium (Debian's `chromium`, over the DevTools protocol). Two tasks:

- an ended one with 500 events on its subjects (the echo task's own, then tool and model calls
  published as the roles publish theirs): the time to the first byte of its page, and to the page
  rendered in the browser (navigation to the `load` event, its newest 100 rows laid out, the
  "show earlier" control above them); the same for the first view of such a task, nothing of it
  read by the console yet (one more task per round); and a "show earlier" click until its 100
  rows are in the page;
- an unfinished one (its pipeline waits for a planner nobody serves), its page open: the delay
  from publishing an event on the bus to its row in the page (SSE), measured in the browser's own
  clock against the publish time taken in this process (one machine, one clock).

Beside them, `codeloop status TASK_ID` for the ended task as a user runs it (a new process: import,
connect, read the record, print), and `status --json`. Targets: page under
300 ms, SSE delay under 200 ms. Prints medians and 90th percentiles.

    .venv/bin/python benchmarks/console_bench.py [--rounds 20] [--screenshots DIR]
"""

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import httpx2

from agents.client import submit_task, watch_task
from agents.messages import TaskSubmitted
from agents.observe.events import StepInfo, publish_event
from agents.orchestrator.pipeline import choice_of
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from codeloop.config.pipelines import resolve_pipeline
from codeloop.config.serve_note import client_config_for
from codeloop.console.events import read_events
from codeloop.console.hosting import ConsoleHosting
from codeloop.console.timeline import PAGE_ROWS
from codeloop.services.tasks_backend import BusTasks
from codeloop.testing import make_repo
from codeloop.wiring.process import Hosting, Workers, serve
from tool_servers.protocol.scopes import Scope
from tool_servers.tasks.backend import Submission

if TYPE_CHECKING:
    from playwright.async_api import Page


EVENTS = 500
CHROMIUM = "/usr/bin/chromium"
REPO = {"calc.py": "def add(a, b):\n    return a + b\n"}


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"median {statistics.median(ordered) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms   (n={len(ordered)})"
    )


async def fill_events(bus: Bus, task_id: str, count: int) -> None:
    step = StepInfo(task_id=task_id, role="coder", step_id="99-bench", trace_id="bench")
    for i in range(count):
        if i % 2:
            data = {"model": "function:bench", "outcome": "ok", "input_tokens": 900 + i, "output_tokens": 40}
            await publish_event(bus, "model_call", f"model call {i}", data, step=step)
        else:
            args = {"path": f"src/module_{i}.py", "start_line": 1, "end_line": 80}
            data = {
                "server": "fs",
                "tool": "read_file",
                "arguments": args,
                "outcome": "ok",
                "duration_ms": 3.2,
            }
            await publish_event(bus, "tool_call", f"fs.read_file ok {i}", data, step=step)


async def ended_task(bus: Bus, root: Path, count: int) -> str:
    """An echo task run to its end, then given tool and model call events up to `count` in all."""
    echo = choice_of(resolve_pipeline("echo", root / "calc"))
    task = TaskSubmitted(text="say hello", repo=str(root / "calc"), mode="read", pipeline=echo)
    envelope, _ = await submit_task(bus, task)
    with anyio.fail_after(60):
        await watch_task(bus, envelope.task_id, lambda e: None)
    have = len(await read_events(bus, envelope.task_id))
    await fill_events(bus, envelope.task_id, count - have)
    return envelope.task_id


async def waiting_task(bus: Bus, root: Path) -> str:
    """A task owned by the console's principal whose plan stage waits for a planner nobody runs."""
    backend = await BusTasks.open(bus, max_running=100, check_credentials=False)
    submission = Submission(principal="serve", text="explain add", repo=root / "calc", mode="read")
    return await backend.submit(submission)


async def time_to_first_byte(url: str, headers: dict[str, str], rounds: int) -> list[float]:
    times = []
    async with httpx2.AsyncClient() as http:
        for _ in range(rounds):
            started = time.perf_counter()
            async with http.stream("GET", url, headers=headers) as response:
                async for _ in response.aiter_raw():
                    times.append(time.perf_counter() - started)
                    break
            assert response.status_code == 200, response.status_code
    return times


@dataclass(frozen=True)
class BenchTasks:
    ended: str
    """500 events, viewed every round."""
    fresh: list[str]
    """500 events each, each viewed once: the console has read none of them before."""
    waiting: str
    """Unfinished: its page follows its events live."""


@dataclass
class BrowserFigures:
    rendered: list[float]
    first_view: list[float]
    earlier: list[float]
    delays: list[float]


async def browser_figures(
    base: str, token: str, tasks: BenchTasks, bus: Bus, rounds: int, shots: Path | None
) -> BrowserFigures:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await page.goto(f"{base}/?token={token}")
        figures = BrowserFigures([], [], [], [])
        for fresh in tasks.fresh:
            figures.first_view.append(await navigation(page, f"{base}/tasks/{fresh}"))
        for _ in range(rounds):
            figures.rendered.append(await navigation(page, f"{base}/tasks/{tasks.ended}"))
        assert await page.locator("#timeline li.event").count() == PAGE_ROWS
        assert await page.locator("#show-earlier").count() == 1
        if shots is not None:
            await page.screenshot(path=str(shots / "task-500-events.png"))
        for _ in range(rounds):
            await page.goto(f"{base}/tasks/{tasks.ended}")
            started = time.perf_counter()
            await page.click("#show-earlier")
            await page.wait_for_function(
                "n => document.querySelectorAll('#timeline li.event').length >= n", arg=2 * PAGE_ROWS
            )
            figures.earlier.append(time.perf_counter() - started)
        await page.goto(f"{base}/tasks/{tasks.waiting}")
        await page.wait_for_selector("#live-state:text-is('live')")
        step = StepInfo(task_id=tasks.waiting, role="planner", step_id="01-bench", trace_id="bench")
        for i in range(rounds):
            marker = f"sse-{i}-{secrets.token_hex(4)}"
            seen = page.wait_for_function(
                "m => [...document.querySelectorAll('#timeline li')].some(li => li.textContent.includes(m)) && performance.timeOrigin + performance.now()",
                arg=marker,
                polling="raf",
            )
            published = time.time() * 1000
            await publish_event(bus, "note", marker, {}, step=step)
            at = await (await seen).json_value()
            figures.delays.append((float(at) - published) / 1000)
        await browser.close()
    return figures


async def navigation(page: "Page", url: str) -> float:
    """Seconds from asking for `url` to its `load` event (its rows laid out, styles and scripts in)."""
    started = time.perf_counter()
    await page.goto(url, wait_until="load")
    return time.perf_counter() - started


def status_times(task_id: str, home: Path, rounds: int, *extra: str) -> list[float]:
    env = {**os.environ, "CODELOOP_HOME": str(home)}
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "codeloop", "status", task_id, *extra],
            env=env,
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - started)
    return times


async def main(rounds: int, shots: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base_dir = Path(tmp)
        make_repo(base_dir / "root" / "calc", REPO)
        token = secrets.token_urlsafe(24)
        token_file = base_dir / "tokens"
        token_file.write_text(f"{token} serve read,operator\n")
        token_file.chmod(0o600)
        console = ConsoleHosting(
            root=base_dir / "root", scopes=frozenset({Scope.READ}), token_file=token_file, max_running=100
        )
        config = BusConfig(state_dir=base_dir / "state")
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            note = await tg.start(
                lambda task_status: serve(
                    config,
                    stop=stop,
                    workers=Workers(roles=("orchestrator", "echo")),
                    hosting=Hosting(metrics=None, console=console),
                    task_status=task_status,
                )
            )
            base = note.console.url.rstrip("/")
            async with open_bus(client_config_for(config, note)) as bus:
                ended = await ended_task(bus, base_dir / "root", EVENTS)
                fresh = [await ended_task(bus, base_dir / "root", EVENTS) for _ in range(rounds)]
                waiting = await waiting_task(bus, base_dir / "root")
                tasks = BenchTasks(ended=ended, fresh=fresh, waiting=waiting)
                headers = {"authorization": f"Bearer {token}"}
                reading = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    await read_events(bus, ended)
                    reading.append(time.perf_counter() - started)
                ttfb = await time_to_first_byte(f"{base}/tasks/{ended}", headers, rounds)
                browser = await browser_figures(base, token, tasks, bus, rounds, shots)
                status = await anyio.to_thread.run_sync(
                    status_times, ended, config.state_dir, max(3, rounds // 4)
                )
                status_json = await anyio.to_thread.run_sync(
                    status_times, ended, config.state_dir, max(3, rounds // 4), "--json"
                )
            stop.set()
    print(f"task with {EVENTS} events, {rounds} rounds (targets: page < 300 ms, SSE < 200 ms)")
    print(f"  reading its events from the bus      {spread(reading)}")
    print(f"  console page, time to first byte     {spread(ttfb)}")
    print(f"  console page, rendered in Chromium   {spread(browser.rendered)}")
    print(f"    the same, first view of a task     {spread(browser.first_view)}")
    print(f"  show {PAGE_ROWS} earlier events (click)     {spread(browser.earlier)}")
    print(f"  SSE, bus event -> row in the page    {spread(browser.delays)}")
    print(f"  codeloop status TASK_ID (process)    {spread(status)}")
    print(f"  codeloop status TASK_ID --json       {spread(status_json)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--screenshots", type=Path, default=None, help="Save a screenshot of the 500-event page here."
    )
    args = parser.parse_args()
    if args.screenshots is not None:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    anyio.run(main, args.rounds, args.screenshots)
