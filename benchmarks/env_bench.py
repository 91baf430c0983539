"""Project environment benchmark: the first build of Flask's environment against what a second
task on the same tree pays to get it from the cache.

    .venv/bin/python benchmarks/env_bench.py [--rounds 5] [--keep-cache DIR] [--repo PATH]

The project is `--repo` (a git checkout, copied; its dependency files resolve as of their last
commit), by default Flask 2.2.5 made from its released sdist as the tests make it
(tests/support/releases.py: downloaded with pip once, checked by hash, committed with the release's
date). In one run it prints:
- the first build: detection, interpreter lookup, key, and the build itself (from the package
  index; pip's and uv's own download caches may be warm, which is what a second machine of a
  fleet sees too), into an empty environment cache;
- a second task on the same tree, in this process (a long-lived `codeloop serve`): the median
  over `--rounds` of `open_environment` on a fresh copy of the tree — detection, the key (hashing
  the dependency files), the cache lookup and the lease;
- the same in a new process each round (`codeloop run` without a serve), which also pays the
  interpreter lookup and imports (the process start itself is not counted);
- a second task as the pipeline runs it, in this process against an embedded nats-server: the
  submission's extra work (the dependency files' dates from git, `dependency_dates`), then in a
  scratch workspace materialized from the snapshot, the environment settings read from its
  configuration and `open_environment` (the exec server's first command does exactly that). Its
  sum is the environment overhead a second task on the same tree pays (target: under 1 s).
Nothing of Flask runs here: the benchmark builds and looks up; the tests run only in the sandbox.
"""

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from agents.workspace import capture_snapshot, materialize
from bus.config import BusConfig
from bus.connection import open_bus
from bus.server import open_nats_server
from bus.streams import ensure_streams
from codeloop.config.project_environment import dependency_dates, environment_settings
from sandbox.environments import EnvironmentSettings, build_variables, open_environment

ROOT = Path(__file__).resolve().parent.parent
LOOKUP = """
import anyio, json, os, sys, time
from pathlib import Path
started = time.monotonic()
from sandbox.environments import EnvironmentSettings, build_variables, open_environment
async def main():
    settings = EnvironmentSettings(cache_dir=Path(sys.argv[1]), build_env=build_variables(os.environ))
    async with open_environment(Path(sys.argv[2]), settings) as lease:
        return lease.info.built
built = anyio.run(main)
print(json.dumps({"built": built, "seconds": time.monotonic() - started}))
"""


def checkout(target: Path, repo: Path | None) -> Path:
    """A copy of `repo` at `target`, or Flask 2.2.5 from its release (the tests' helper, by path)."""
    if repo is not None:
        shutil.copytree(repo, target, symlinks=True)
        return target
    spec = importlib.util.spec_from_file_location("releases", ROOT / "tests" / "support" / "releases.py")
    assert spec is not None and spec.loader is not None
    releases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(releases)
    return releases.project(releases.FLASK, target)


async def lookup(tree: Path, settings: EnvironmentSettings) -> tuple[float, bool, float]:
    """Wall seconds of one `open_environment`, whether it built, and the build's own seconds."""
    started = time.monotonic()
    async with open_environment(tree, settings) as lease:
        assert lease is not None
        return time.monotonic() - started, lease.info.built, lease.info.build_s


async def scratch_rounds(checkout: Path, base: Path, cache: Path, rounds: int) -> list[tuple[float, float]]:
    """Per round: (seconds of the submission's dependency dates, seconds of the scratch
    workspace's settings + `open_environment`), the environment found in the cache."""
    measured = []
    async with open_nats_server(base / "nats") as server:
        async with open_bus(BusConfig(servers=(server.url,), state_dir=base / "state")) as bus:
            await ensure_streams(bus)
            for round_ in range(rounds):
                started = time.perf_counter()
                dates = await anyio.to_thread.run_sync(dependency_dates, checkout)
                dated_s = time.perf_counter() - started
                ref = await capture_snapshot(bus, checkout, source_dates=dates)
                scratch = await materialize(bus, ref, base / f"scratch-{round_}")
                started = time.perf_counter()
                settings = environment_settings(scratch).model_copy(update={"cache_dir": cache})
                async with open_environment(scratch, settings) as lease:
                    assert lease is not None and not lease.info.built, "the scratch workspace rebuilt it"
                measured.append((dated_s, time.perf_counter() - started))
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep-cache", type=Path, default=None, help="use (and keep) this cache directory")
    parser.add_argument(
        "--repo", type=Path, default=None, help="the project (default: Flask 2.2.5's release)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="codeloop-env-bench-") as scratch:
        base = Path(scratch)
        cache = args.keep_cache or base / "cache"
        settings = EnvironmentSettings(cache_dir=cache, build_env=build_variables(os.environ))
        first_s, built, build_s = anyio.run(lookup, checkout(base / "tree-0", args.repo), settings)
        in_process, new_process = [], []
        for round_ in range(1, args.rounds + 1):
            tree = base / f"tree-{round_}"
            shutil.copytree(base / "tree-0", tree, symlinks=True)
            seconds, rebuilt, _ = anyio.run(lookup, tree, settings)
            assert not rebuilt, "the second task rebuilt the environment"
            in_process.append(seconds)
            done = subprocess.run(
                [sys.executable, "-c", LOOKUP, str(cache), str(tree)],
                capture_output=True,
                text=True,
                check=True,
            )
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            assert not measured["built"]
            new_process.append(measured["seconds"])
        scratch_runs = anyio.run(scratch_rounds, base / "tree-0", base, cache, args.rounds)
    second = statistics.median(in_process)
    fresh = statistics.median(new_process)
    dated = statistics.median(d for d, _ in scratch_runs)
    opened = statistics.median(o for _, o in scratch_runs)
    name = args.repo.name if args.repo else "Flask 2.2.5"
    print(
        f"{name} environment ({'built' if built else 'found in the cache'}; its build step took {build_s:.1f} s)"
    )
    print(f"{'first build (detect + build)':<50}{first_s:>10.3f} s")
    print(f"{'second task, same process (median)':<50}{second:>10.3f} s   {first_s / second:>8.0f}x faster")
    print(
        f"{'second task, new process (median, imports incl.)':<50}{fresh:>10.3f} s   {first_s / fresh:>8.0f}x faster"
    )
    print(f"{'second task in a scratch workspace (median):':<50}")
    print(f"{'  submission: dependency dates from git':<50}{dated:>10.3f} s")
    print(f"{'  workspace: settings + open_environment':<50}{opened:>10.3f} s")
    total = dated + opened
    print(f"{'  environment overhead, both':<50}{total:>10.3f} s   {first_s / total:>8.0f}x faster")


if __name__ == "__main__":
    main()
