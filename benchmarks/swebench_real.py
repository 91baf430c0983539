"""Real SWE-bench instances through `codeloop swebench`, gold patches: the environments validated
and graded by the official parser in gVisor, with how long each instance took.

    .venv/bin/python benchmarks/swebench_real.py INSTANCES --repos DIR [--ids A,B] [--jobs 2]

INSTANCES is SWE-bench's published file (e.g. SWE-bench Lite's test split as JSON lines);
`--repos` holds the repositories as `codeloop swebench --repos` takes them (docs/swebench.md:
a clone, a bare mirror or a bundle per repository). Nothing of SWE-bench's is kept in this
repository: bring the instances and the repositories. For example, pallets__flask-4992:

    git clone --bare https://github.com/pallets/flask repos/flask.git
    .venv/bin/python benchmarks/swebench_real.py lite.jsonl --repos repos --ids pallets__flask-4992

prints, per instance, whether gold resolved it, the FAIL_TO_PASS / PASS_TO_PASS counts that passed
and failed, the environment's Python and build time, and the instance's wall seconds; the run ends
non-zero when a gold patch did not resolve its instance (a broken environment, here).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(instances: Path, repos: Path, ids: str | None, jobs: int, out: Path) -> dict:
    args = [sys.executable, "-m", "codeloop", "swebench", str(instances), "--repos", str(repos)]
    args += ["--predictions", "gold", "--jobs", str(jobs), "--out", str(out), "--json"]
    if ids:
        args += ["--instance-ids", ids]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0 and not done.stdout.strip():
        sys.exit(f"codeloop swebench failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def describe(out: Path, instance_id: str) -> str:
    folder = out / "instances" / instance_id
    outcome = json.loads((folder / "outcome.json").read_text())
    report_path = folder / "report.json"
    line = f"{instance_id}: "
    if report_path.is_file():
        status = json.loads(report_path.read_text())[instance_id].get("tests_status", {})
        counts = {
            kind: (len(status.get(kind, {}).get("success", [])), len(status.get(kind, {}).get("failure", [])))
            for kind in ("FAIL_TO_PASS", "PASS_TO_PASS")
        }
        line += " ".join(f"{kind} {ok} passed / {bad} failed" for kind, (ok, bad) in counts.items())
    environment = outcome.get("environment") or {}
    return (
        f"{line}; python {environment.get('python_version', '?')}, environment built in "
        f"{environment.get('build_s', 0):.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("instances", type=Path)
    parser.add_argument("--repos", type=Path, required=True, help="the repositories, by path")
    parser.add_argument("--ids", help="comma-separated instance ids (default: every instance)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, help="the run's directory (default: a temporary one)")
    options = parser.parse_args()
    out = options.out or Path(tempfile.mkdtemp(prefix="swebench-real-"))
    started = time.monotonic()
    summary = run(options.instances, options.repos, options.ids, options.jobs, out)
    seconds = time.monotonic() - started
    resolved = set(summary.get("resolved_ids", []))
    chosen = sorted(p.name for p in (out / "instances").iterdir() if p.is_dir())
    for instance_id in chosen:
        mark = "resolved" if instance_id in resolved else "NOT resolved"
        print(f"{mark:>12}  {describe(out, instance_id)}")
    print(f"{len(resolved)}/{len(chosen)} resolved by gold in {seconds:.0f} s ({out})")
    if len(resolved) != len(chosen):
        sys.exit(1)


if __name__ == "__main__":
    main()
