"""SWE-bench harness timings, in one run, on the synthetic repository the tests use (made here,
in a temporary directory with its own environment cache; nothing foreign runs on the host):

1. environment: the first build of the synthetic spec's environment beside a cached lookup
   (what a second instance of the same repository and version pays), from `outcome.json`;
2. sandbox overhead of the test run: the instance's eval test command (`pytest -rA` on the
   synthetic repository's own trivial tests) in the gVisor sandbox, against the same command in
   the same virtualenv and tree run plainly on the host, medians of --rounds, and their ratio
   (target: at most 1.5x);
3. instances per hour at --jobs 1 and --jobs 2 over N copies of the synthetic instance, gold
   patches, the environment already cached.

Run: .venv/bin/python benchmarks/swebench_bench.py [--rounds 5] [--instances 6]   (root, runsc)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio


def _synthetic():
    """The tests' synthetic repository and instances (tests/swebench/synthetic.py), by path."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tests" / "swebench" / "synthetic.py"
    spec = importlib.util.spec_from_file_location("swebench_synthetic", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cli(*args: object, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codeloop", "swebench", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
    )


def _outcome(out: Path, instance_id: str) -> dict:
    return json.loads((out / "instances" / instance_id / "outcome.json").read_text())


def environment_times(inputs: dict[str, Path], tmp: Path, env: dict[str, str]) -> None:
    common = [
        inputs["instances"],
        "--repos",
        inputs["repos"],
        "--specs",
        inputs["specs"],
        "--predictions",
        "gold",
    ]
    for label in ("first build", "cached"):
        out = tmp / f"env-{label.replace(' ', '-')}"
        done = _cli(*common, "--instance-ids", "synthetic__calc-1", "--out", out, env=env)
        if done.returncode != 0:
            sys.exit(done.stderr)
        outcome = _outcome(out, "synthetic__calc-1")
        print(
            f"1. environment, {label:11}: {outcome['env_s']:6.2f} s to ready (built now: "
            f"{outcome['environment']['built']}; the build itself {outcome['environment']['build_s']:.2f} s; "
            f"layer install included), instance total {outcome['wall_s']:.2f} s"
        )


async def overhead(inputs: dict[str, Path], tmp: Path, rounds: int) -> None:
    from codeloop.cli.swebench import this_machine
    from codeloop.swebench.instances import load_instances
    from codeloop.swebench.layer import layer_recipe
    from codeloop.swebench.recipe import make_recipe
    from codeloop.swebench.repositories import find_source
    from codeloop.swebench.run import settings_for
    from codeloop.swebench.specs import load_extra_specs, spec_for
    from codeloop.swebench.trees import instance_tree, project_tree
    from sandbox import open_sandbox

    load_extra_specs(inputs["specs"])
    instance = load_instances(inputs["instances"])[0]
    settings = settings_for({"timeout_s": 600, "memory_mb": 2048}, this_machine())
    source = find_source(instance.repo, repos_dir=inputs["repos"], cache_dir=settings.cache_dir / "swebench")
    recipe = make_recipe(instance, spec_for(instance), source)
    project = project_tree(recipe, source, settings.cache_dir)
    tree = tmp / "overhead" / "tree"
    instance_tree(source, instance.base_commit, tree, recipe)
    argv = ["pytest", "-rA", "tests/test_core.py"]
    plain: list[float] = []
    boxed: list[float] = []
    async with settings.store.use(recipe.to_recipe(), project) as shared:
        async with settings.store.use(layer_recipe(recipe, shared.environment, tree), tree) as lease:
            env = lease.environment
            host_env = {
                "PATH": ":".join([*(str(e.venv / "bin") for e in env.chain()), "/usr/bin", "/bin"]),
                "VIRTUAL_ENV": str(env.venv),
                "HOME": "/tmp",
                "LANG": "C.UTF-8",
            }
            workdir = str(env.project_path)  # where the harness runs the eval script
            async with open_sandbox(tree, limits=settings.limits, policy="gvisor", environment=env) as box:
                await box.exec(argv, cwd=workdir)  # the first run starts the sandbox, writes bytecode
                for _ in range(rounds):  # interleaved, so the machine's load weighs on both alike
                    started = time.perf_counter()
                    await anyio.run_process(argv, cwd=tree, env=host_env, check=True)
                    plain.append(time.perf_counter() - started)
                    result = await box.exec(argv, cwd=workdir)
                    assert result.exit_code == 0, result.stdout + result.stderr
                    boxed.append(result.duration_s)
    p, b = statistics.median(plain), statistics.median(boxed)
    print(
        f"2. test run, median of {rounds}: plain {p:.3f} s, gVisor {b:.3f} s, ratio {b / p:.2f}x (target <= 1.5x)"
    )


def throughput(inputs: dict[str, Path], tmp: Path, count: int, env: dict[str, str]) -> None:
    rows = [json.loads(line) for line in inputs["instances"].read_text().splitlines()]
    copies = tmp / "copies.jsonl"
    copies.write_text(
        "".join(
            json.dumps({**rows[0], "instance_id": f"synthetic__calc-1{n:02d}"}) + "\n" for n in range(count)
        )
    )
    for jobs in (1, 2):
        out = tmp / f"jobs-{jobs}"
        started = time.monotonic()
        done = _cli(
            copies,
            "--repos",
            inputs["repos"],
            "--specs",
            inputs["specs"],
            "--predictions",
            "gold",
            "--jobs",
            jobs,
            "--out",
            out,
            env=env,
        )
        wall = time.monotonic() - started
        resolved = (
            json.loads((out / "report.json").read_text())["resolved_instances"] if done.returncode == 0 else 0
        )
        print(
            f"3. --jobs {jobs}: {count} instances in {wall:.1f} s = {3600 * count / wall:.0f} instances/hour ({resolved} resolved)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--instances", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="swebench-bench-") as scratch:
        tmp = Path(scratch)
        env = {**os.environ, "CODELOOP_CACHE_DIR": str(tmp / "cache"), "CODELOOP_HOME": str(tmp / "home")}
        os.environ.update(
            {"CODELOOP_CACHE_DIR": env["CODELOOP_CACHE_DIR"], "CODELOOP_HOME": env["CODELOOP_HOME"]}
        )
        inputs = _synthetic().write_inputs(tmp / "inputs")
        environment_times(inputs, tmp, env)
        anyio.run(overhead, inputs, tmp, args.rounds)
        throughput(inputs, tmp, args.instances, env)


if __name__ == "__main__":
    main()
