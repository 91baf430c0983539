"""Where the suite's time goes: the test time of each file, from a pytest JUnit XML report.

    .venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --junitxml=junit.xml
    .venv/bin/python scripts/test_times.py junit.xml [--top N]

prints the files by their summed test time (set-up, call and teardown: pytest's JUnit `time`),
each with its number of tests and the running share of the total, then the slowest tests. On a
shared or loaded machine the absolute figures drift; the ranking and the shares are what to
compare (docs/testing.md, "Suite time").
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path


def file_of(classname: str) -> str:
    """`tests.e2e.test_tasks.SomeClass` -> `tests/e2e/test_tasks.py` (a test module's path)."""
    parts: list[str] = []
    for part in classname.split("."):
        parts.append(part)
        if part.startswith("test_"):
            break
    return "/".join(parts) + ".py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("report", type=Path, help="a pytest --junitxml report")
    parser.add_argument("--top", type=int, default=25, help="how many files and tests to list")
    args = parser.parse_args(argv)
    by_file: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    tests: list[tuple[float, str]] = []
    for case in ET.parse(args.report).getroot().iter("testcase"):
        seconds = float(case.get("time", 0))
        path = file_of(case.get("classname", ""))
        by_file[path] += seconds
        count[path] += 1
        tests.append((seconds, f"{path}::{case.get('name')}"))
    total = sum(by_file.values())
    print(f"{total:.0f} s of test time, {sum(count.values())} tests in {len(by_file)} files")
    running = 0.0
    for path, seconds in sorted(by_file.items(), key=lambda item: -item[1])[: args.top]:
        running += seconds
        print(f"{seconds:8.1f} s {count[path]:5d} tests {100 * running / max(total, 1e-9):5.1f} %  {path}")
    print("slowest tests:")
    for seconds, name in sorted(tests, reverse=True)[: args.top]:
        print(f"{seconds:8.1f} s  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
