"""Gold-derived variants through `codeloop swebench`: for each instance whose gold patch has two
hunks or more, the gold patch without its last hunk and without its first, each graded by the
official parsers and grading, beside the gold run's outcome. Prints, per instance and variant,
whether it resolved and which FAIL_TO_PASS / PASS_TO_PASS tests failed: the grading tells the
variants from gold by the per-test outcomes, not by anything else.

    .venv/bin/python benchmarks/swebench_variants.py INSTANCES --repos DIR --out DIR \\
        [--instance-ids A,B | --repo OWNER/NAME] [--jobs N]

It reads only what it is given (the instances file and repositories are arguments); the runs land
under --out (variant-last-hunk-out/, variant-first-hunk-out/, gold/).
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from codeloop.swebench.instances import load_instances, select
from codeloop.swebench.variants import gold_variants


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("instances", type=Path)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--instance-ids")
    parser.add_argument("--repo")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    ids = args.instance_ids.split(",") if args.instance_ids else None
    chosen = [i for i in select(load_instances(args.instances), ids=ids, repo=args.repo) if gold_variants(i)]
    if not chosen:
        sys.exit("no chosen instance has a gold patch of two hunks or more")
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"gold": "gold"}
    for name in ("last-hunk-out", "first-hunk-out"):
        path = args.out / f"{name}.jsonl"
        lines = [
            json.dumps(
                {
                    "instance_id": i.instance_id,
                    "model_name_or_path": name,
                    "model_patch": gold_variants(i)[name],
                }
            )
            for i in chosen
            if name in gold_variants(i)
        ]
        path.write_text("\n".join(lines) + "\n")
        runs[name] = str(path)
    ids_arg = ",".join(i.instance_id for i in chosen)
    for name, predictions in runs.items():
        out = args.out / name
        if (out / "report.json").is_file():
            continue
        subprocess.run(
            [
                sys.executable,
                "-m",
                "codeloop",
                "swebench",
                str(args.instances),
                "--repos",
                str(args.repos),
                "--predictions",
                predictions,
                "--instance-ids",
                ids_arg,
                "--jobs",
                str(args.jobs),
                "--out",
                str(out),
            ],
            check=False,
        )
    _print(chosen, args.out, list(runs))


def _print(chosen: list, out: Path, names: list[str]) -> None:
    print(f"{'instance':32} " + " ".join(f"{n:>16}" for n in names) + "  tests failing (variants)")
    differing = 0
    for instance in chosen:
        cells, failing = [], []
        for name in names:
            report = out / name / "instances" / instance.instance_id / "report.json"
            if not report.is_file():
                cells.append(f"{'error':>16}")
                continue
            entry = json.loads(report.read_text())[instance.instance_id]
            cells.append(f"{'resolved' if entry['resolved'] else 'unresolved':>16}")
            if name != "gold" and "tests_status" in entry:
                status = entry["tests_status"]
                failing.append(
                    len(status["FAIL_TO_PASS"]["failure"]) + len(status["PASS_TO_PASS"]["failure"])
                )
        differing += sum(1 for c in cells[1:] if c.strip() != cells[0].strip())
        print(f"{instance.instance_id:32} " + " ".join(cells) + f"  {failing}")
    print(f"{len(chosen)} instances, {differing} variant outcomes differ from gold's")


if __name__ == "__main__":
    main()
