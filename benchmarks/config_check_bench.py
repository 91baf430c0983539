"""How fast a bad name is refused: `run`, `submit` and `eval` with a model that cannot be resolved.

    .venv/bin/python benchmarks/config_check_bench.py [--samples 5]

Prints, in one run, per command and per bad name: the wall time from starting the `codeloop`
process to its exit (2, one `error:` line), median and slowest of the samples, and beside them
`codeloop --version`, the floor any command pays to start Python and the CLI. [refusal <= 1 s]

Commands run one after another, alternating, so a change in machine load hits all alike. Each
runs with its own CODELOOP_HOME and user configuration directory in a temporary directory.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODELOOP = [sys.executable, "-m", "codeloop"]
BAD = {
    "unknown provider": ["--model", "nosuchprovider:model-x"],
    "missing function": ["--model", f"function:{ROOT / 'examples' / 'models' / 'scripted.py'}:nosuch"],
    "missing credentials": ["--model", "anthropic:claude-sonnet-4-5"],
}


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False, stdin=subprocess.DEVNULL)
    return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    samples = parser.parse_args().samples
    with tempfile.TemporaryDirectory(prefix="codeloop-config-bench-") as scratch:
        base = Path(scratch)
        repo = base / "repo"
        repo.mkdir()
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_") and k != "ANTHROPIC_API_KEY"
        }
        env |= {"CODELOOP_HOME": str(base / "home"), "XDG_CONFIG_HOME": str(base / "xdg")}
        heads = {
            "run": ["run", "fix it", "--repo", str(repo)],
            "submit": ["submit", "fix it", "--repo", str(repo)],
            "eval": ["eval", str(base / "taskset"), "--out", str(base / "out")],
        }
        rows: dict[str, list[float]] = {"codeloop --version": []}
        codes: set[int] = set()
        for _ in range(samples):
            rows["codeloop --version"].append(_time([*CODELOOP, "--version"], env)[0])
            for command, head in heads.items():
                for what, args in BAD.items():
                    took, code = _time([*CODELOOP, *head, *args], env)
                    rows.setdefault(f"{command}: {what}", []).append(took)
                    codes.add(code)
    width = max(len(k) for k in rows)
    print(f"{'':<{width}}  median s  slowest s   ({samples} samples, exit codes {sorted(codes)})")
    for name, times in rows.items():
        print(f"{name:<{width}}  {statistics.median(times):8.3f}  {max(times):9.3f}")


if __name__ == "__main__":
    main()
