"""How fast a push reaches another worker, and what reading the center costs a task.

    .venv/bin/python benchmarks/config_center_bench.py [--samples 10]

On one nats-server: a `serve` (orchestrator + echo role, the echo pipeline: no model, so the
figures are the center's and the bus's alone) and, as the operator, a separate connection.

- **push → task**: the operator writes a new revision, then submits echo tasks one after another
  until one runs under it; the time from the write's ack to that task's "task submitted"
  transition (which names its `config_revision`), as the serve's orchestrator saw it. [< 2 s]
- **watch**: the time from the write's ack until a `CenterWatch` on another connection holds the
  revision (what every worker's watch sees).
- **per-task cost**: an echo task's submit → result time with a center document holding models,
  budgets and a quota (the orchestrator settles the task under it and enters it in the ledger),
  side by side with the same task on a bus without a center document and without a quota (a task
  that reads only the files its submitter read); and `WatchedCenter.settle` alone, the in-memory
  part. [center's extra < 20 ms]

Samples alternate between the two buses' configurations, so a change in machine load hits both.
"""

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.client import submit_task, watch_task  # noqa: E402
from agents.messages import TaskSubmitted  # noqa: E402
from agents.orchestrator.pipeline import ECHO  # noqa: E402
from bus.center import CenterRecord, CenterWatch, ensure_center, watch_center, write  # noqa: E402
from bus.config import BusConfig  # noqa: E402
from bus.connection import Bus, open_bus  # noqa: E402
from bus.server import open_nats_server  # noqa: E402
from codeloop.services.center_watch import WatchedCenter  # noqa: E402
from codeloop.wiring.process import Hosting, Workers, serve  # noqa: E402

DOCUMENT = (
    '[models]\nplanner = "test"\n\n[budgets]\nmax_steps = {steps}\n\n'
    "[quotas.default]\ntasks_per_day = 100000\ntokens_per_day = 1000000000\n"
)


async def _push(bus: Bus, steps: int) -> tuple[int, float]:
    record = CenterRecord(
        document=DOCUMENT.format(steps=steps), pushed_by="bench", pushed_at=datetime.now(UTC), message="bench"
    )
    revision = await write(bus, await ensure_center(bus), record)
    return revision, time.perf_counter()


async def _echo(bus: Bus, repo: Path) -> tuple[float, int | None, float]:
    """(seconds from submit to result, the revision the task named, when it was submitted)."""
    submitted_at: list[float] = []

    def seen(envelope) -> None:
        if envelope.kind == "event" and envelope.payload.get("data", {}).get("status") == "submitted":
            submitted_at.append(time.perf_counter())

    started = time.perf_counter()
    envelope, _ = await submit_task(bus, TaskSubmitted(text="ping", repo=str(repo)))
    final = await watch_task(bus, envelope.task_id, seen)
    took = time.perf_counter() - started
    return took, (final.payload if final else {}).get("config_revision"), (submitted_at or [started])[0]


async def main(samples: int) -> None:
    with tempfile.TemporaryDirectory(prefix="codeloop-center-bench-") as scratch:
        base = Path(scratch)
        repo = base / "repo"
        repo.mkdir()
        async with open_nats_server(base / "nats") as server:
            url = server.url
            stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                await tg.start(
                    lambda task_status: serve(
                        BusConfig(servers=(url,), state_dir=base / "serve"),
                        stop=stop,
                        workers=Workers(roles=("orchestrator", "echo"), pipeline=ECHO),
                        hosting=Hosting(metrics=None),
                        task_status=task_status,
                    )
                )
                async with open_bus(BusConfig(servers=(url,), name="operator")) as bus:
                    async with watch_center(bus) as watch:
                        await _figures(bus, watch, repo, samples)
                stop.set()


async def _figures(bus: Bus, watch: CenterWatch, repo: Path, samples: int) -> None:
    no_center, with_center, reach, seen = [], [], [], []
    await _echo(bus, repo)  # warm up: consumers, the first snapshot-less task
    for sample in range(samples):
        # Without a document first: the bucket's key deleted, so no revision applies.
        kv = await ensure_center(bus)
        await kv.delete("document")
        no_center.append((await _echo(bus, repo))[0])
        revision, pushed = await _push(bus, steps=10 + sample)
        async with anyio.create_task_group() as tg:

            async def watched(revision: int = revision, pushed: float = pushed) -> None:
                await watch.wait_for(revision)
                seen.append(time.perf_counter() - pushed)

            tg.start_soon(watched)
            while True:
                took, named, submitted = await _echo(bus, repo)
                if named is not None and named >= revision:
                    reach.append(submitted - pushed)
                    with_center.append(took)
                    break
    settle = WatchedCenter(watch)
    task = TaskSubmitted(text="ping", repo=str(repo))
    settle.settle(task, "local")  # parse once, as a worker does per revision
    started = time.perf_counter()
    for _ in range(1000):
        settle.settle(task, "local")
    settle_ms = time.perf_counter() - started  # 1000 calls: seconds = ms per call

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:8.1f} {max(values) * 1000:8.1f}"

    print(f"{'':<46} median ms  slowest ms   ({samples} samples)")
    print(f"{'push -> first task under it (other worker)':<46} {ms(reach)}   [target < 2000]")
    print(f"{'push -> a watch on another connection has it':<46} {ms(seen)}")
    print(f"{'echo task, center document + quota':<46} {ms(with_center)}")
    print(f"{'echo task, files only (no document, no quota)':<46} {ms(no_center)}")
    extra = statistics.median(with_center) - statistics.median(no_center)
    print(
        f"{'per-task cost of the center (median difference)':<46} {extra * 1000:8.1f}            [target < 20]"
    )
    print(f"{'settle() alone (in memory, per task)':<46} {settle_ms:8.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=10)
    anyio.run(main, parser.parse_args().samples)
