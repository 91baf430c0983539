"""The verifier's verdict on real repositories, against SWE-bench's resolved label.

For each SWE-bench instance chosen, on its base tree (the instance's tree as `codeloop swebench`
makes it: base commit plus the spec's edits), in an environment built from its SWE-bench spec
(the spec's Python and install commands, as a configured `[environment]`), three patch variants
are verified with the task's problem statement as the task text — no test named, no plan target:

- `gold+test`: the gold fix with the test patch. The harness resolves it (SWE-bench's own
  validation): the verifier must say `passed`;
- `test`: the test patch alone. Never resolved: the verifier must never say `passed`, and should
  name a FAIL_TO_PASS test as `test.still_failing`;
- `gold`: the gold fix alone. Its code is the resolving fix, but no test of the tree shows it: the
  verdict may be `passed` or `unverified`, never `failed` by a test the harness counts as passing.

Printed: one line per verification, then the confusion table of verdicts against the label
(resolved: `gold+test` and `gold`; unresolved: `test`), the precision of `passed`, the share of
`unverified`, and the `gold+test` variants whose every FAIL_TO_PASS test fails here too (this
environment cannot run them — no network — so no verdict can be `passed` by them). Every run happens in the gVisor sandbox with no network; environments are built on
the host and cached (`$CODELOOP_CACHE_DIR`).

With `--pool DIR` the patches are real agents' instead: every labelled source of DIR
(`NAME.jsonl` with `NAME.labels.json`: `{"resolved": [ids]}`, every other predicted instance
unresolved) that predicts a non-empty patch for the instance, verified as a coder's patch (no test
patch). Printed besides the table: the selector's pick among each instance's candidates
(`agents.roles.selector.rank.choose`), and over the instances with both a resolved and an
unresolved candidate, how many the pick resolves against the oracle (any candidate resolves), the
expected count of a random pick and each source's own count.

Run: .venv/bin/python benchmarks/verdict_accuracy.py INSTANCES.jsonl --repos DIR
         [--repo pallets/flask] [--instance-ids A,B] [--sample N] [--variants gold+test,test,gold]
         [--pool DIR [--sources A,B] [--mixed-only]] [--timeout S] [--memory-mb N]
"""

import argparse
import json
import os
import random
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import platformdirs

from agents.roles.selector.rank import Candidate, choose
from agents.roles.verifier.verify import PatchTask, verify_patch
from codeloop.cli.swebench import this_machine
from codeloop.swebench.instances import Instance, load_instances
from codeloop.swebench.judging import SpecTools, spec_environment
from codeloop.swebench.recipe import INPUTS_DIR, make_recipe
from codeloop.swebench.repositories import find_source
from codeloop.swebench.run import settings_for
from codeloop.swebench.specs import spec_for
from codeloop.swebench.trees import instance_tree

VARIANTS = ("gold+test", "test", "gold")
LABEL = {"gold+test": "resolved", "test": "unresolved", "gold": "resolved"}


class Pool:
    """Real agents' predictions with labels: source -> instance -> patch, and the resolved ids."""

    def __init__(self, folder: Path, sources: list[str] | None) -> None:
        self.patches: dict[str, dict[str, str]] = {}
        self.resolved: dict[str, set[str]] = {}
        for labels in sorted(folder.glob("*.labels.json")):
            name = labels.name.removesuffix(".labels.json")
            if sources and name not in sources:
                continue
            lines = (folder / f"{name}.jsonl").read_text().splitlines()
            rows = [json.loads(line) for line in lines if line.strip()]
            self.patches[name] = {r["instance_id"]: r["model_patch"] or "" for r in rows}
            self.resolved[name] = set(json.loads(labels.read_text())["resolved"])

    def candidates(self, instance_id: str) -> list[tuple[str, str, str]]:
        """(source, patch, label) of every source with a non-empty patch for the instance."""
        return [
            (name, p[instance_id], "resolved" if instance_id in self.resolved[name] else "unresolved")
            for name, p in self.patches.items()
            if p.get(instance_id, "").strip()
        ]

    def mixed(self, instance_id: str) -> bool:
        labels = {label for _, _, label in self.candidates(instance_id)}
        return labels == {"resolved", "unresolved"}


def _variants(instance: Instance, args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(name, patch, label) of each patch to verify for the instance."""
    if args.pool_data is not None:
        return args.pool_data.candidates(instance.instance_id)
    patches = {"gold+test": instance.patch + instance.test_patch, "test": instance.test_patch}
    return [(v, patches.get(v, instance.patch), LABEL[v]) for v in args.variants]


async def verify_instance(
    instance: Instance, args: argparse.Namespace, cache: Path, scratch: Path
) -> list[dict[str, Any]]:
    source = find_source(instance.repo, repos_dir=args.repos, cache_dir=cache)
    recipe = make_recipe(instance, spec_for(instance), source)
    # The sandbox limits a `codeloop swebench` run gives an instance's tests: a large suite under
    # coverage needs more than the default command's CPU time and memory.
    limits = settings_for({"timeout_s": args.timeout, "memory_mb": args.memory_mb}, this_machine()).limits
    rows = []
    for variant, patch, label in _variants(instance, args):
        tree = scratch / f"{instance.instance_id}-{variant}"
        await anyio.to_thread.run_sync(lambda t=tree: instance_tree(source, instance.base_commit, t, recipe))
        inputs = tree / INPUTS_DIR  # the recipe's input files, untracked, where its commands read them
        inputs.mkdir(exist_ok=True)
        for name, text in recipe.files.items():
            (inputs / name).write_text(text)
        started = time.monotonic()
        report, _ = await verify_patch(
            workspace=tree,
            patch=patch,
            task=PatchTask(mode="execute", text=instance.problem_statement),
            tools=SpecTools(
                spec_environment(instance, recipe, cache, build_env=this_machine().build_env),
                args.backend,
                limits,
            ),
            deadline=datetime.now(UTC) + timedelta(seconds=args.timeout),
            baseline=None,
            cache_dir=cache / "verdict-accuracy-coverage",
        )
        f2p = set(instance.FAIL_TO_PASS)
        row = {
            "instance": instance.instance_id,
            "variant": variant,
            "label": label,
            "verdict": report.verdict,
            "evidence_kind": report.evidence_kind,
            "regressions": len(report.regressions),
            "errors": len(report.errors),
            "behaviour": report.behaviour,
            "starting_behaviour": report.starting_behaviour,
            "patch": patch,
            "seconds": round(time.monotonic() - started, 1),
            "still_failing_f2p": sorted(set(report.still_failing) & f2p),
            # Failing with the patch whatever the verdict made of them (blamed or the environment's).
            "failing_f2p": sorted(set(report.still_failing + report.preexisting + report.regressions) & f2p),
            "f2p": sorted(f2p),
            "failing_p2p": sorted(
                set(report.still_failing + report.regressions) & set(instance.PASS_TO_PASS)
            ),
            "failures": [f"{f.failure_class} {f.test_id or f.path or ''}".strip() for f in report.errors][:3],
            "summary": report.summary,
            "coverage": next((c.summary for c in report.checks if c.name == "coverage"), "not run"),
            "covering": len(report.covering),
        }
        print(json.dumps({k: v for k, v in row.items() if k not in _QUIET}), flush=True)
        rows.append(row)
        if args.out is not None:
            with args.out.open("a") as out:
                out.write(json.dumps(row) + "\n")
    return rows


_QUIET = ("behaviour", "starting_behaviour", "patch")
"""Row fields kept in `--out` but not printed."""


def selection(rows: list[dict[str, Any]]) -> None:
    """The selector's pick per instance, over the instances with both labels among candidates."""
    by_instance: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_instance.setdefault(r["instance"], []).append(r)
    mixed = {i: rs for i, rs in by_instance.items() if {r["label"] for r in rs} == {"resolved", "unresolved"}}
    picked = 0
    expected = 0.0
    per_source: Counter[str] = Counter()
    print(f"\nselection over {len(mixed)} instance(s) with a resolved and an unresolved candidate:")
    for instance, rs in sorted(mixed.items()):
        candidates = [
            Candidate(
                key=r["variant"],
                patch=r["patch"],
                verdict=r["verdict"],
                evidence_kind=r["evidence_kind"],
                regressions=r["regressions"],
                errors=r["errors"],
                behaviour=r["behaviour"],
            )
            for r in rs
        ]
        starting: dict[str, str] = {}
        for r in rs:
            starting.update(r["starting_behaviour"])
        choice = choose(candidates, starting)
        label = next(r["label"] for r in rs if r["variant"] == choice.chosen)
        picked += label == "resolved"
        expected += sum(r["label"] == "resolved" for r in rs) / len(rs)
        per_source.update(r["variant"] for r in rs if r["label"] == "resolved")
        print(f"  {instance}: chose {choice.chosen} ({label}); {choice.reason}")
    sources = ", ".join(f"{s} {n}" for s, n in per_source.most_common())
    print(
        f"selected resolved: {picked} of {len(mixed)} (oracle {len(mixed)}; random pick expected "
        f"{expected:.1f}; per source: {sources or 'none'})"
    )


def table(rows: list[dict[str, Any]]) -> None:
    counts = Counter((r["label"], r["verdict"]) for r in rows)
    verdicts = ("passed", "failed", "unverified")
    head = "label / verdict"
    print(f"\n{head:<18}" + "".join(f"{v:>12}" for v in verdicts))
    for label in ("resolved", "unresolved"):
        print(f"{label:<18}" + "".join(f"{counts[(label, v)]:>12}" for v in verdicts))
    passed = counts[("resolved", "passed")] + counts[("unresolved", "passed")]
    precision = counts[("resolved", "passed")] / passed if passed else float("nan")
    unverified = sum(counts[(label, "unverified")] for label in ("resolved", "unresolved"))
    print(
        f"\nverifications: {len(rows)}; precision of passed: {precision:.2f}; unverified: {unverified / len(rows):.0%}"
    )
    tests = [r for r in rows if r["variant"] == "test"]
    named = sum(1 for r in tests if r["still_failing_f2p"])
    print(f"test patch alone: {named}/{len(tests)} name a FAIL_TO_PASS test as still failing")
    bad_gold = [r for r in rows if r["variant"] == "gold" and r["verdict"] == "failed"]
    print(f"gold alone failed: {len(bad_gold)} ({', '.join(r['instance'] for r in bad_gold) or 'none'})")
    unrunnable = [r for r in rows if r["variant"] == "gold+test" and set(r["failing_f2p"]) >= set(r["f2p"])]
    verdicts = ", ".join(f"{r['instance']} {r['verdict']}" for r in unrunnable) or "none"
    print(
        f"gold+test whose every FAIL_TO_PASS test fails in this sandbox too: {len(unrunnable)} ({verdicts})"
    )
    by_p2p = [r for r in rows if r["verdict"] == "failed" and r["label"] == "resolved" and r["failing_p2p"]]
    print(f"resolved variants failed by a test the harness counts as passing (PASS_TO_PASS): {len(by_p2p)}")


async def main(args: argparse.Namespace) -> None:
    instances = load_instances(args.instances)
    if args.repo:
        instances = [i for i in instances if i.repo == args.repo]
    if args.instance_ids:
        wanted = set(args.instance_ids.split(","))
        instances = [i for i in instances if i.instance_id in wanted]
    args.pool_data = Pool(args.pool, args.sources) if args.pool is not None else None
    if args.pool_data is not None:
        instances = [i for i in instances if args.pool_data.candidates(i.instance_id)]
        if args.mixed_only:
            instances = [i for i in instances if args.pool_data.mixed(i.instance_id)]
    if args.sample:
        instances = random.Random(0).sample(instances, min(args.sample, len(instances)))
    cache = Path(os.environ.get("CODELOOP_CACHE_DIR") or platformdirs.user_cache_path("codeloop"))
    print(f"verdict_accuracy: {len(instances)} instance(s): {', '.join(i.instance_id for i in instances)}")
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="verdict-accuracy-") as scratch:
        for instance in instances:
            try:
                rows += await verify_instance(instance, args, cache, Path(scratch))
            except Exception as exc:  # one instance's trouble (its environment) must not end the run
                print(
                    json.dumps(
                        {"instance": instance.instance_id, "error": f"{type(exc).__name__}: {exc}"[:300]}
                    )
                )
    if rows:
        table(rows)
        if args.pool_data is not None:
            selection(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("instances", type=Path, help="SWE-bench instances, one JSON object per line")
    parser.add_argument(
        "--repos",
        type=Path,
        required=True,
        help="a folder of the repositories: NAME.bundle, a clone NAME/ or a bare NAME.git",
    )
    parser.add_argument("--repo", default=None, help="only this repository's instances (OWNER/NAME)")
    parser.add_argument("--instance-ids", default=None, help="only these instances (comma-separated ids)")
    parser.add_argument("--sample", type=int, default=0, help="a fixed random sample of this many instances")
    parser.add_argument(
        "--variants",
        type=lambda s: s.split(","),
        default=list(VARIANTS),
        help=f"the patch variants verified, comma-separated (default: {','.join(VARIANTS)})",
    )
    parser.add_argument(
        "--pool",
        type=Path,
        default=None,
        help="verify real agents' predictions instead of the gold variants: a folder of NAME.jsonl "
        "with NAME.labels.json",
    )
    parser.add_argument(
        "--sources", type=lambda s: s.split(","), default=None, help="only these sources of --pool"
    )
    parser.add_argument(
        "--mixed-only",
        action="store_true",
        help="only instances with both a resolved and an unresolved candidate in --pool",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="append every row, in full, to this JSON-lines file"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds each verification may take (default 1800)"
    )
    parser.add_argument(
        "--memory-mb",
        type=int,
        default=6144,
        help="the sandbox's memory limit (default 6144, as codeloop swebench)",
    )
    parser.add_argument(
        "--backend", default="gvisor", choices=["gvisor", "process"], help="the sandbox (default gvisor)"
    )
    anyio.run(main, parser.parse_args(), backend="asyncio")
