"""`verify_bench.py --swebench`: the verifier's cost on a real repository, beside its plain suite.

For one SWE-bench instance (its tree and its environment as `codeloop swebench` makes them) and
several candidate patches (predictions files, the problem statement as the task, no test patch),
measured in one run, in the gVisor sandbox with no network, the environment built first and not
timed:

1. the plain suite: one `run_tests` of the whole suite in the instance's environment, in a fresh
   exec server session (the sandbox's start included) — the unit of cost;
2. the first candidate's verification with nothing cached: the starting tree's work (the coverage
   run of the suite, the task's example on the starting tree) and the candidate's own;
3. each further candidate's verification, sharing the starting tree's work (the coverage cache and
   the baseline the first returned), as `codeloop swebench --select` and `--attempts` share it.

Printed: each figure, (2) as a multiple of (1), and each of (3) in seconds.

Run: .venv/bin/python benchmarks/verify_bench.py --swebench INSTANCES.jsonl --repos DIR
         --instance ID --predictions A.jsonl [--predictions B.jsonl ...] [--timeout S]
"""

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import platformdirs

from agents.roles.verifier.exec_session import EXEC_SCOPES, open_exec_session
from agents.roles.verifier.verify import PatchTask, verify_patch
from codeloop.cli.swebench import this_machine
from codeloop.swebench.instances import load_instances
from codeloop.swebench.judging import SpecTools, spec_environment
from codeloop.swebench.recipe import INPUTS_DIR, make_recipe
from codeloop.swebench.repositories import find_source
from codeloop.swebench.run import settings_for
from codeloop.swebench.specs import spec_for
from codeloop.swebench.trees import instance_tree


def _patches(files: list[Path], instance_id: str) -> list[tuple[str, str]]:
    found = []
    for path in files:
        for line in path.read_text().splitlines():
            row = json.loads(line) if line.strip() else {}
            if row.get("instance_id") == instance_id and (row.get("model_patch") or "").strip():
                found.append((path.stem, row["model_patch"]))
    return found


async def real_repository(args: argparse.Namespace) -> None:
    instance = next((i for i in load_instances(args.swebench) if i.instance_id == args.instance), None)
    if instance is None:
        raise SystemExit(f"verify_bench: {args.instance} is not in {args.swebench}")
    candidates = _patches(args.predictions, instance.instance_id)
    if not candidates:
        raise SystemExit(f"verify_bench: no predictions file has a patch for {instance.instance_id}")
    cache = Path(os.environ.get("CODELOOP_CACHE_DIR") or platformdirs.user_cache_path("codeloop"))
    source = find_source(instance.repo, repos_dir=args.repos, cache_dir=cache)
    recipe = make_recipe(instance, spec_for(instance), source)
    limits = settings_for({"timeout_s": args.timeout, "memory_mb": args.memory_mb}, this_machine()).limits
    tools = SpecTools(
        spec_environment(instance, recipe, cache, build_env=this_machine().build_env), "gvisor", limits
    )
    with tempfile.TemporaryDirectory(prefix="verify-real-") as scratch:
        tree = Path(scratch) / "tree"
        await anyio.to_thread.run_sync(lambda: instance_tree(source, instance.base_commit, tree, recipe))
        (tree / INPUTS_DIR).mkdir(exist_ok=True)
        for name, text in recipe.files.items():
            (tree / INPUTS_DIR / name).write_text(text)
        print(
            f"== {instance.instance_id}: {len(candidates)} candidate(s); building its environment (not timed)"
        )
        async with open_exec_session(tools.servers(tree, EXEC_SCOPES)["exec"]) as session:
            # Any run in the project's interpreter builds (or takes from the cache) its environment.
            await session.run_example("```python\nimport sys\n```\n", timeout_s=60.0)
        started = time.monotonic()
        async with open_exec_session(tools.servers(tree, EXEC_SCOPES)["exec"]) as session:
            plain = await session.run_tests([], timeout_s=args.timeout)
        suite_s = time.monotonic() - started
        print(
            f"plain suite run: {suite_s:.1f} s ({plain.passed} passed, {plain.failed} failed, {plain.errors} errors)"
        )
        coverage = Path(scratch) / "coverage-cache"
        baseline = None
        for n, (name, patch) in enumerate(candidates):
            started = time.monotonic()
            report, baseline = await verify_patch(
                workspace=tree,
                patch=patch,
                task=PatchTask(mode="execute", text=instance.problem_statement),
                tools=tools,
                deadline=datetime.now(UTC) + timedelta(seconds=args.timeout),
                baseline=baseline,
                cache_dir=coverage,
            )
            took = time.monotonic() - started
            what = "first candidate, starting tree's work included" if n == 0 else "further candidate"
            ratio = f"; {took / suite_s:.2f}x the plain suite" if n == 0 and suite_s else ""
            print(f"{name}: {took:.1f} s ({what}{ratio}): {report.summary[:160]}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--swebench", type=Path, default=None, help="real-repository mode: SWE-bench instances (JSON lines)"
    )
    parser.add_argument("--repos", type=Path, default=None, help="with --swebench: the repositories' folder")
    parser.add_argument("--instance", default=None, help="with --swebench: the instance id")
    parser.add_argument(
        "--predictions",
        type=Path,
        action="append",
        default=[],
        help="with --swebench: a predictions file (repeat)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="with --swebench: seconds per run")
    parser.add_argument("--memory-mb", type=int, default=6144, help="with --swebench: the sandbox's memory")
