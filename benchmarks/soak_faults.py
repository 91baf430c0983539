"""Soak under faults: tasks through `codeloop serve` while workers and the nats-server are SIGKILLed.

    .venv/bin/python benchmarks/soak_faults.py [--tasks 1000] [--workers 2] [--kill-worker-every 5]
        [--kill-server-every 8] [--submit-rate 20] [--max-seconds 900]

Starts, in a temporary state directory on loopback only: one `codeloop serve --no-mcp --role
orchestrator` (with its embedded nats-server) and `--workers` echo workers, each a
`codeloop serve --role echo --nats URL`. It submits `--tasks` tasks (ids known beforehand, each
publish retried until the stream acks it: the id deduplicates a retry), and meanwhile SIGKILLs a
random worker every `--kill-worker-every` s (starting a replacement) and the nats-server every
`--kill-server-every` s (serve restarts it on the same store and port). Faults stop once every
task is submitted and has finished, or at `--max-seconds`; then the tasks still unfinished get a
grace period of one ack wait to be redelivered.

Prints: tasks submitted, finished (record `done`), lost (submitted, never finished), doubled
(more than one result event for one task, i.e. a task carried out twice), and the faults injected.
Target: 0 lost, 0 doubled.
"""

import argparse
import itertools
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
from anyio.abc import Process

from agents.client import submit_task
from agents.messages import TaskSubmitted
from agents.orchestrator.records import TaskRecords
from bus import subjects
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.credentials import read_credentials
from bus.errors import BusError

ROOT = Path(__file__).resolve().parents[1]
CODELOOP = [sys.executable, "-m", "codeloop"]
REDELIVERY_GRACE_S = 45.0
"""After the faults stop: the actors' ack wait (30 s) plus time to redo the work."""


_CREDENTIALS: dict[str, str] = {}
"""The embedded server's generated user and password, for the workers that join it with --nats."""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    return {**env, **_CREDENTIALS, "CODELOOP_HOME": str(home), "PYTHONPATH": str(ROOT)}


async def _start(home: Path, *args: str, log: Path) -> Process:
    with log.open("ab") as stderr:
        return await anyio.open_process(
            [*CODELOOP, "serve", "--no-mcp", "--json", *args], env=_env(home), stderr=stderr
        )


async def _ready_url(process: Process) -> str | None:
    """The URL the serve noted once ready; None if it exited first (the server was down) or
    was not ready within a minute."""
    assert process.stdout is not None
    buffer = b""
    with anyio.move_on_after(60):  # stuck connecting through a restart: the caller tries again
        while b"\n" not in buffer:
            try:
                buffer += await process.stdout.receive()
            except anyio.EndOfStream:
                return None
        return json.loads(buffer.split(b"\n", 1)[0])["nats_url"]
    return None


def _nats_server_pid(home: Path) -> int | None:
    for ports in (home / "nats" / "ports").glob("nats-server_*.ports"):
        return int(ports.stem.removeprefix("nats-server_"))
    return None


async def _stop(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(15):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


class Faults:
    """The echo workers and the fault injector."""

    def __init__(self, base: Path, home: Path, url: str, workers: int) -> None:
        self.base, self.home, self.url = base, home, url
        self.workers: list[Process | None] = [None] * workers
        self.killed_workers = 0
        self.killed_servers = 0

    async def start_worker(self, slot: int) -> None:
        while True:
            log = self.base / "workers.log"
            process = await _start(
                self.base / f"worker-{slot}", "--role", "echo", "--nats", self.url, log=log
            )
            if await _ready_url(process) is not None:
                self.workers[slot] = process
                return
            await _stop(process)  # it could not connect while the server restarted: again
            await anyio.sleep(0.5)

    async def kill_workers(self, every_s: float, rng: random.Random) -> None:
        while True:
            await anyio.sleep(every_s)
            slot = rng.randrange(len(self.workers))
            process = self.workers[slot]
            if process is not None and process.returncode is None:
                process.kill()
                await process.wait()
                await process.aclose()
                self.killed_workers += 1
            await self.start_worker(slot)

    async def kill_servers(self, every_s: float) -> None:
        while True:
            await anyio.sleep(every_s)
            pid = _nats_server_pid(self.home)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                    self.killed_servers += 1
                except ProcessLookupError:
                    pass

    async def stop(self) -> None:
        for process in self.workers:
            if process is not None:
                await _stop(process)


async def _wait_all_done(bus: Bus, count: int) -> None:
    """Polled once a second: the records are the outcome being measured, read as a client would."""
    for _ in itertools.count():
        if len(await _done_ids(bus)) >= count:
            return
        await anyio.sleep(1)


async def _submit_all(bus: Bus, ids: list[str], repo: str, *, rate: float) -> int:
    """Submit every id at about `rate` per second, retrying each until the stream acks it (a
    retry is deduplicated), so submissions overlap the faults."""
    for task_id in ids:
        await anyio.sleep(1 / rate)
        while True:
            try:
                await submit_task(bus, TaskSubmitted(text=f"soak {task_id}", repo=repo), task_id=task_id)
                break
            except BusError:
                await anyio.sleep(0.2)  # the server is restarting: try again
    return len(ids)


async def _done_ids(bus: Bus) -> set[str]:
    while True:
        try:
            records = await TaskRecords.open(bus)
            return {state.task_id for state in await records.all() if state.status == "done"}
        except BusError:
            await anyio.sleep(0.5)


async def _result_counts(bus: Bus) -> Counter[str]:
    """How many result events each task has in the events stream (more than 1: carried out twice)."""
    counts: Counter[str] = Counter()
    sub = await bus.js.subscribe(subjects.event("*", "result"), ordered_consumer=True)
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=3)
            except Exception:  # nats TimeoutError: the stream is drained
                return counts
            counts[msg.subject.split(".")[2]] += 1
    finally:
        await sub.unsubscribe()


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="codeloop-soak-") as tmp:
        base = Path(tmp)
        home, repo = base / "home", base / "repo"
        repo.mkdir()
        serve_log = base / "serve.log"
        serve = await _start(home, "--role", "orchestrator", "--pipeline", "echo", log=serve_log)
        try:
            url = await _ready_url(serve)
            assert url is not None, serve_log.read_text()
            credentials = read_credentials(home)
            if credentials is not None:
                _CREDENTIALS.update(
                    CODELOOP_NATS_USER=credentials.user, CODELOOP_NATS_PASSWORD=credentials.password
                )
            faults = Faults(base, home, url, args.workers)
            for slot in range(args.workers):
                await faults.start_worker(slot)
            ids = [f"soak-{i:05d}" for i in range(args.tasks)]
            config = BusConfig(
                servers=(url,),
                state_dir=home,
                reconnect_attempts=600,
                user=credentials.user if credentials else None,
                password=credentials.password if credentials else None,
            )
            async with open_bus(config) as bus:
                submitted = 0
                with anyio.move_on_after(args.max_seconds):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(faults.kill_workers, args.kill_worker_every, rng)
                        tg.start_soon(faults.kill_servers, args.kill_server_every)
                        submitted = await _submit_all(bus, ids, str(repo), rate=args.submit_rate)
                        await _wait_all_done(bus, submitted)
                        tg.cancel_scope.cancel()
                faulted_s = time.monotonic() - started
                with anyio.move_on_after(REDELIVERY_GRACE_S):
                    await _wait_all_done(bus, submitted)
                done = await _done_ids(bus)
                results = await _result_counts(bus)
            await faults.stop()
        finally:
            await _stop(serve)
        restarts = serve_log.read_text().count("embedded nats-server is back")
        serve_alive = serve.returncode in (0, None) or serve.returncode == -signal.SIGTERM
    lost = [task_id for task_id in ids[:submitted] if task_id not in done]
    doubled = [task_id for task_id, n in results.items() if n > 1]
    print(f"tasks submitted   {submitted}")
    print(f"tasks finished    {len(done)}")
    print(f"tasks lost        {len(lost)}" + (f"  e.g. {', '.join(lost[:5])}" if lost else ""))
    print(f"tasks doubled     {len(doubled)}" + (f"  e.g. {', '.join(doubled[:5])}" if doubled else ""))
    print(
        f"workers SIGKILLed {faults.killed_workers} (of {args.workers}; each {args.kill_worker_every:g} s "
        "after the last replacement was up)"
    )
    print(
        f"nats-server SIGKILLed {faults.killed_servers} (every {args.kill_server_every:g} s), "
        f"restarted by serve {restarts}; serve exit code {serve.returncode}"
        + ("" if serve_alive else " (serve died)")
    )
    print(f"seconds under faults {faulted_s:.1f}, total {time.monotonic() - started:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kill-worker-every", type=float, default=5.0)
    parser.add_argument("--kill-server-every", type=float, default=8.0)
    parser.add_argument("--max-seconds", type=float, default=900.0)
    parser.add_argument("--submit-rate", type=float, default=20.0, help="tasks submitted per second")
    parser.add_argument("--seed", type=int, default=1)
    anyio.run(main, parser.parse_args())
