"""File localization on a development set of real issues: codeloop's `--per-file` search beside
whole-file BM25, on both halves, with and without test files, in one run.

The development set is a directory holding `cases.jsonl` (issue text, base commit, the files the
reference fix changed) and `score.py`, its scorer (recall@k, MRR, Acc@k; a built-in BM25
baseline), with the repository trees materialized under `--trees`. For every case of each half
this runs, through `score.py --cmd`,

    codeloop search @ISSUE_FILE --repo TREE --per-file -k 50 --json [--index-dir INDEXES/COMMIT]

once, keeps the ranking, and scores it twice (all files, then `--exclude-tests`, which drops test
files before cutting at k); then the BM25 baseline on the same cases, and prints one table.

    .venv/bin/python benchmarks/localization_eval.py DEVSET --trees TREES \\
        [--index-root DIR] [--halves odd even] [--bm25-python PY] [--sample N] \\
        [--examples --example-setup FILE --example-python PY]

`--examples` also ranks every case with `--run-examples` (the issue's example code run in the
sandbox, executed files filling ranks 6-10) and prints it as its own row; `--example-setup` is
the file of Python an interactive session of the project starts with, `--example-python` the
interpreter the project's code runs on.

`--bm25-python` is an interpreter with `bm25s` and `PyStemmer` (the baseline's needs; codeloop
does not depend on them). Odd lines are the tuning half, even lines the report half.
"""

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

METRICS = ["recall@1", "recall@5", "recall@10", "mrr", "acc@1", "acc@3", "acc@5", "acc@10"]
LABELS = ["R@1", "R@5", "R@10", "MRR", "Acc@1", "Acc@3", "Acc@5", "Acc@10"]


def codeloop_template(work: Path, *, index_root: Path | None, k: int, extra: Sequence[str] = ()) -> str:
    """A `score.py --cmd` template that runs codeloop once per case and replays the saved ranking
    on later runs of the same case (the `--exclude-tests` pass scores the same ranking). `extra`:
    more `codeloop search` arguments."""
    codeloop = f"{shlex.quote(sys.executable)} -m codeloop"
    index = f" --index-dir {shlex.quote(str(index_root))}/{{base_commit}}" if index_root else ""
    more = "".join(f" {shlex.quote(arg)}" for arg in extra)
    saved = f"{shlex.quote(str(work))}/{{id}}.json"
    search = f"{codeloop} search @{{query_file}} --repo {{repo_dir}} --per-file -k {k} --json{index}{more}"
    return (
        f'f={saved}; if [ ! -s "$f" ]; then {search} > "$f.tmp" && mv "$f.tmp" "$f" || exit 1; fi; cat "$f"'
    )


def half_ids(cases: Path, half: str, wanted: set[str]) -> list[str]:
    """The ids of `wanted` that are on the `half` ("odd" or "even") lines of `cases`."""
    out = []
    with cases.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip() and (number % 2 == 1) == (half == "odd"):
                case = json.loads(line)
                if case["id"] in wanted:
                    out.append(case["id"])
    return out


def run_score(score_py: Path, args: list[str], *, python: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as summary:
        cmd = [python, str(score_py), *args, "--summary-json", summary.name]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"score.py failed ({done.returncode}): {done.stderr.strip()[-1000:]}")
        return json.loads(Path(summary.name).read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("devset", type=Path, help="directory with cases.jsonl and score.py")
    ap.add_argument("--trees", type=Path, required=True, help="the materialized trees (score.py's --cache)")
    ap.add_argument("--index-root", type=Path, help="keep each tree's index in DIR/<base_commit>")
    ap.add_argument("--halves", nargs="+", choices=["odd", "even"], default=["odd", "even"])
    ap.add_argument("--bm25-python", default=sys.executable, help="interpreter with bm25s and PyStemmer")
    ap.add_argument("--sample", type=int, help="a random subset of N cases per half (seed 0)")
    ap.add_argument("--ids", nargs="+", metavar="ID", help="only these cases (each scored in its own half)")
    ap.add_argument("-k", type=int, default=50)
    ap.add_argument("--no-bm25", action="store_true", help="codeloop only")
    ap.add_argument("--examples", action="store_true", help="also rank with --run-examples")
    ap.add_argument("--example-setup", type=Path, help="file of Python the examples start with")
    ap.add_argument("--example-python", help="interpreter for the examples")
    a = ap.parse_args()
    score_py = a.devset / "score.py"
    if not score_py.is_file() or not (a.devset / "cases.jsonl").is_file():
        sys.exit(f"{a.devset} holds no score.py and cases.jsonl: pass the development set's directory")
    common = ["--cache", str(a.trees), "-k", str(a.k)]
    rankers = {"codeloop": []}
    if a.examples:
        rankers["codeloop + examples"] = ["--run-examples"]
        if a.example_setup:
            rankers["codeloop + examples"] += ["--example-setup", f"@{a.example_setup.resolve()}"]
        if a.example_python:
            rankers["codeloop + examples"] += ["--example-python", a.example_python]
    if a.sample:
        common += ["--sample", str(a.sample), "--seed", "0"]
    rows: list[tuple[str, str, str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="localization-") as work:
        for half in a.halves:
            templates = {}
            for number, (ranker, extra) in enumerate(rankers.items()):
                saved = Path(work) / f"{half}-{number}"
                saved.mkdir()
                templates[ranker] = codeloop_template(saved, index_root=a.index_root, k=a.k, extra=extra)
            only = []
            if a.ids:
                picked = half_ids(a.devset / "cases.jsonl", half, set(a.ids))
                if not picked:
                    continue
                only = ["--ids", *picked]
            for exclude in (False, True):
                flags = [*common, "--lines", half, *only, *(["--exclude-tests"] if exclude else [])]
                mode = "non-test files" if exclude else "all files"
                for ranker, template in templates.items():
                    got = run_score(score_py, [*flags, "--cmd", template], python=sys.executable)
                    rows.append((half, mode, ranker, got))
                if not a.no_bm25:
                    base = run_score(score_py, [*flags, "--baseline", "bm25"], python=a.bm25_python)
                    rows.append((half, mode, "bm25", base))
                print(f"done: {half} half, {mode}", file=sys.stderr, flush=True)
    print("| half | candidates | ranker | n | " + " | ".join(LABELS) + " | s/case |")
    print("|---|---|---|---:|" + "---:|" * (len(LABELS) + 1))
    for half, mode, ranker, got in rows:
        figures = " | ".join(f"{got['overall'][m]:.3f}" for m in METRICS)
        failed = f" ({len(got['failed'])} failed)" if got["failed"] else ""
        print(
            f"| {half} | {mode} | {ranker} | {got['n']}{failed} | {figures} | "
            f"{got['seconds_per_case_median']:.2f} |"
        )


if __name__ == "__main__":
    main()
