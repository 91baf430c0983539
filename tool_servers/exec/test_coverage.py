"""Which test executed which lines: a pytest run under coverage.py, one dynamic context per test.

`run_tests(coverage_files=[...])` runs pytest inside `COVERAGE_SCRIPT` instead of `python -m
pytest`: the script starts coverage.py (a maintained library: its C tracer, or `sys.monitoring`
where the interpreter has it and coverage chooses it) measuring only the files asked for, runs
`pytest.main` with a small plugin that switches coverage's context to each test's node id for its
setup, call and teardown (so a fixture that calls the code counts for the test using it), and
records every test's outcome and, for a failing one, where it crashed (pytest's `reprcrash`: the
innermost frame's path and line, the exception as reported). Code run outside any test — imports during collection, a
session-wide fixture's set-up before the first test, the plugin's own start — is in the context
"" (empty). At the end it writes one JSON file to the sandbox's outbox: per measured file, per
context, the lines executed; per test id, its outcome; per failing test id, its crash.

Why restricted to a few files: the tracer costs nothing for code it does not measure (coverage
decides once per code object), so measuring the files a patch changes keeps the run close to a
plain one (benchmarks/verify_bench.py). Why not pytest-cov: it would have to be installed in the
project's environment; coverage is one of codeloop's test tools (`sandbox.environments`), and
the plugin here is twenty lines.

The file is written by code under test, so it is read as hostile: at most `MAX_COVERAGE_BYTES`,
a regular file, parsed into `TestCoverage` (bounded lists), paths made root-relative.
"""

import json
import os
import stat
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
MAX_COVERAGE_BYTES = 64 * 1024 * 1024
MAX_COVERAGE_FILES = 200
Outcome = Literal["passed", "failed", "error", "skipped"]

COVERAGE_SCRIPT = r"""
import json, os, sys
# Absolute now: a test may change the working directory before the result is written.
out, n = os.path.abspath(sys.argv[1]), int(sys.argv[2])
include, args = sys.argv[3 : 3 + n], sys.argv[3 + n :]
sys.argv = [sys.argv[0]]
result = {"error": None, "files": {}, "outcomes": {}, "crashes": {}}
cov = None
try:
    import coverage
    cov = coverage.Coverage(data_file=None, include=include, config_file=False)
    cov.start()
except Exception as exc:
    result["error"] = "coverage cannot run in %s: %s" % (sys.executable, exc)
import pytest


class CodeloopPerTest:
    # Old-style wrapper: projects pin pytest and pluggy versions that predate `wrapper=True`.
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if cov is not None:
            cov.switch_context(item.nodeid)
        yield
        if cov is not None:
            cov.switch_context("")

    def pytest_runtest_logreport(self, report):
        seen = result["outcomes"].get(report.nodeid)
        crash = getattr(report.longrepr, "reprcrash", None)
        if report.failed and crash is not None and report.nodeid not in result["crashes"]:
            message = str(crash.message).strip()[:1000]
            result["crashes"][report.nodeid] = {"path": str(crash.path)[:4096], "line": int(crash.lineno), "message": message}
        elif report.failed and hasattr(report.longrepr, "errorstring") and report.nodeid not in result["crashes"]:
            # A fixture that cannot be resolved: pytest reports its first line as the error.
            message = str(report.longrepr.errorstring).strip().split("\n")[0][:1000]
            path, line = str(report.longrepr.filename)[:4096], int(report.longrepr.firstlineno or 0)
            result["crashes"][report.nodeid] = {"path": path, "line": line, "message": message}
        if report.failed:
            result["outcomes"][report.nodeid] = "failed" if report.when == "call" else "error"
        elif report.skipped and seen is None:
            result["outcomes"][report.nodeid] = "skipped"
        elif report.passed and report.when == "call" and seen is None:
            result["outcomes"][report.nodeid] = "passed"

    def pytest_collectreport(self, report):
        if report.failed:
            result["outcomes"][report.nodeid] = "error"


code = pytest.main(args, plugins=[CodeloopPerTest()])
if cov is not None:
    cov.stop()
    data = cov.get_data()
    for name in data.measured_files():
        by_context = {}
        for line, contexts in (data.contexts_by_lineno(name) or {}).items():
            for context in contexts:
                by_context.setdefault(context, []).append(line)
        result["files"][name] = {c: sorted(lines) for c, lines in by_context.items()}
with open(out, "w") as handle:
    json.dump(result, handle)
sys.exit(int(code))
"""


class Crash(BaseModel):
    """Where a failing test's exception was raised."""

    model_config = _CONFIG

    path: str = Field(max_length=4096)
    """Root-relative when inside the repository, else as the interpreter saw it (absolute)."""
    line: int
    message: str = Field(max_length=1000)
    """The exception as pytest reports it (`AssertionError: ...` and its explanation), cut to 1000
    characters."""


class TestCoverage(BaseModel):
    """Per test, the lines it executed in the measured files, and every test's outcome."""

    __test__ = False  # not a pytest test class, despite the name
    model_config = _CONFIG

    files: dict[str, dict[str, list[int]]] = Field(default_factory=dict)
    """Root-relative path of each measured file that ran -> context -> 1-based lines executed.
    A context is a test's node id, or "" for code run outside any test (imports at collection,
    a session fixture's set-up). A measured file that never ran is absent."""
    outcomes: dict[str, Outcome] = Field(default_factory=dict)
    """Every test's outcome by node id (a test file that could not be collected: `error`)."""
    crashes: dict[str, Crash] = Field(default_factory=dict)
    """Per failing test (node id), where its first failure was raised."""
    error: str | None = None
    """Why nothing was measured (coverage.py cannot be imported by the test interpreter, or the
    run wrote no coverage file); the outcomes are then those of a plain run, when there are any."""


def coverage_argv(python: str, out: str, includes: list[str], pytest_args: list[str]) -> list[str]:
    """The command running pytest with `pytest_args` under coverage of `includes` (absolute
    path patterns), writing its result to `out` (a path in the sandbox)."""
    # No "--" before the pytest arguments: after -c every word is the script's argument.
    return [python, "-c", COVERAGE_SCRIPT, out, str(len(includes)), *includes, *pytest_args]


def include_patterns(paths: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """Absolute spellings of each root-relative path under each of the root's spellings."""
    return [prefix + path for path in paths for prefix in prefixes]


def read_coverage(path: Path, prefixes: tuple[str, ...]) -> TestCoverage:
    """The coverage file the script wrote at `path`, paths made relative to the root; a
    `TestCoverage` with `error` set when it is missing or unusable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return TestCoverage(error="the coverage run wrote no result (pytest did not finish)")
    except OSError as exc:
        return TestCoverage(error=f"the coverage result cannot be opened as a file: {exc.strerror}")
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_COVERAGE_BYTES:
            return TestCoverage(error="the coverage result is not a regular file of a usable size")
        data = handle.read(MAX_COVERAGE_BYTES + 1)
    try:
        raw = json.loads(data)
        files: dict[str, dict[str, list[int]]] = {}
        for name, contexts in dict(raw.get("files") or {}).items():
            # The same file imported under two spellings of the root: one entry.
            merged = files.setdefault(relative_path(name, prefixes), {})
            for context, lines in dict(contexts).items():
                merged[context] = sorted(set(merged.get(context, [])) | set(lines))
        crashes = {
            test_id: {
                **crash,
                "path": relative_path(str(crash.get("path", "")), prefixes),
                # As the test report says it: the paths in a message relative to the root too.
                "message": relative_text(str(crash.get("message", "")), prefixes),
            }
            for test_id, crash in dict(raw.get("crashes") or {}).items()
        }
        return TestCoverage.model_validate({**raw, "files": files, "crashes": crashes})
    except (ValueError, TypeError, AttributeError, ValidationError) as exc:
        return TestCoverage(error=f"unreadable coverage result: {str(exc)[:200]}")


def relative_path(name: str, prefixes: tuple[str, ...]) -> str:
    """`name` relative to the root when it starts with one of the root's spellings."""
    for prefix in prefixes:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def relative_text(text: str, prefixes: tuple[str, ...]) -> str:
    """`text` with every spelling of the root taken out of the paths in it."""
    for prefix in prefixes:
        text = text.replace(prefix, "")
    return text
