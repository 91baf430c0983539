"""Snapshot benchmark: capture and materialise a small repository and a 1,000-file one.

    .venv/bin/python benchmarks/snapshot_bench.py [--rounds 5]

Prints, in one run, the median over `--rounds` of:
- capture, cold: every blob new to the object store (each round's files carry a round number);
- capture, warm: the same tree again (only the manifest is looked up);
- capture, one file changed: every blob looked up, one stored;
- materialize from the local path (files copied from the user's tree after a digest check);
- materialize from the object store (the original path gone, as on another machine);
- the workspace patch of a one-file edit;
- for scale, a plain `shutil.copytree` of the same tree on the same disk (what writing the files
  alone costs here, with no bus and no git).
Everything runs in this process against an embedded nats-server with its own temp state dir.
"""

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from agents.workspace import capture_snapshot, materialize, workspace_patch
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from bus.server import open_nats_server
from bus.streams import ensure_streams

STEPS = (
    "capture cold",
    "capture warm",
    "capture 1 changed",
    "materialize local",
    "materialize store",
    "patch",
    "copytree baseline",
)


def write_repo(root: Path, files: int, round_no: int) -> None:
    """A git repository of `files` Python modules of 0.1-4 kB in 25 packages, uncommitted."""
    for i in range(files):
        path = root / f"pkg{i % 25}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# round {round_no}\nVALUE = {i}\n" + "def f(x):\n    return x + 1\n" * (i % 150))
    subprocess.run(["git", "init", "-q", str(root)], check=True)


async def timed(call: Callable[[], Awaitable[object]]) -> tuple[float, object]:
    start = time.perf_counter()
    result = await call()
    return time.perf_counter() - start, result


async def one_round(bus: Bus, base: Path, files: int, round_no: int) -> dict[str, float]:
    repo = base / f"repo-{files}-{round_no}"
    write_repo(repo, files, round_no)
    times: dict[str, float] = {}
    times["capture cold"], ref = await timed(lambda: capture_snapshot(bus, repo))
    times["capture warm"], _ = await timed(lambda: capture_snapshot(bus, repo))
    (repo / "pkg0" / "mod0.py").write_text("changed\n")
    times["capture 1 changed"], ref = await timed(lambda: capture_snapshot(bus, repo))
    local = base / f"local-{files}-{round_no}"
    times["materialize local"], _ = await timed(lambda: materialize(bus, ref, local))  # pyright: ignore[reportArgumentType] - timed returns the snapshot reference the call made
    elsewhere = ref.model_copy(update={"source_path": str(base / "not-on-this-machine")})  # pyright: ignore[reportAttributeAccessIssue] - timed returns the snapshot reference the call made
    remote = base / f"remote-{files}-{round_no}"
    times["materialize store"], _ = await timed(lambda: materialize(bus, elsewhere, remote))
    (remote / "pkg1" / "mod1.py").write_text("edited\n")
    times["patch"], _ = await timed(lambda: workspace_patch(remote))
    copy = base / f"copy-{files}-{round_no}"
    ignore = shutil.ignore_patterns(".git")
    times["copytree baseline"], _ = await timed(
        lambda: anyio.to_thread.run_sync(lambda: shutil.copytree(repo, copy, ignore=ignore))
    )
    return times


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="snapshot-bench-") as tmp:
        base = Path(tmp)
        async with open_nats_server(base / "nats") as server:
            config = BusConfig(servers=(server.url,), state_dir=base / "state")
            async with open_bus(config) as bus:
                await ensure_streams(bus)
                results: dict[int, list[dict[str, float]]] = {20: [], 1000: []}
                for round_no in range(rounds):
                    for files in results:  # interleaved, so a change in machine load hits both sizes
                        results[files].append(await one_round(bus, base, files, round_no))
    print(f"snapshot benchmark: median of {rounds} rounds, ms (loopback nats-server, this machine)")
    print(f"{'step':<20}{'20 files':>12}{'1,000 files':>14}")
    for step in STEPS:
        cells = [statistics.median(r[step] for r in results[files]) * 1000 for files in results]
        print(f"{step:<20}{cells[0]:>12.1f}{cells[1]:>14.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    anyio.run(main, parser.parse_args().rounds)
