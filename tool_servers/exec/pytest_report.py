"""The structured result of a pytest run, read from the JUnit XML report pytest writes.

Why JUnit XML: it is pytest's own, stable, machine-readable report (no plugin to install into the
workspace's interpreter, no parsing of terminal output that plugins and verbosity change). With
`junit_family=xunit1` each test case carries `file` and `line`; the failure text is the
traceback in `--tb=short` form, whose `path:line: in func` entries give where a test failed.

The report is written by code under test, so it is read as hostile: through `defusedxml` (no DTD,
no entities: a "billion laughs" report cannot blow up memory, an external entity cannot read a
host file), at most `MAX_REPORT_BYTES` of it, and only a regular file (a FIFO or a symlink planted
at its path could hang the read or lead it out of the workspace). A refused report is a
`ReportError`, which `run_tests` returns as `report_error`.
"""

import os
import re
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Literal

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException
from pydantic import BaseModel, ConfigDict

from sandbox.environments.environment import EnvironmentInfo
from tool_servers.exec.test_coverage import TestCoverage, relative_path, relative_text

_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
TRACEBACK_LINES = 40
TRACEBACK_CHARS = 4000
MESSAGE_CHARS = 1000
MAX_FAILURES = 1000
"""Failures listed; beyond it the counts still say how many failed (a verifier sorts every failure
it is given, and an environment that breaks a whole suite makes hundreds)."""
FULL_TRACEBACKS = 50
"""Failures given their whole (trimmed) traceback; the others carry `SHORT_TRACEBACK_CHARS` of it —
its last entry, where it was raised, and the exception — which keeps a large failing run's answer
small."""
SHORT_TRACEBACK_CHARS = 1000
"""As much of an exception as a verifier compares two crashes by (its first lines), and more."""
MAX_REPORT_BYTES = 32 * 1024 * 1024
"""A report above this is refused unread: ~100,000 test cases' worth, far beyond any real run."""
SetupClass = Literal["env.setup", "test.collection_error"]
_LOCATION = re.compile(r"^(?P<path>[^\s:][^:\n]*\.py):(?P<line>\d+): ", re.M)


class TestFailure(BaseModel):
    """One failed or erroring test (or a test file that could not be collected)."""

    __test__ = False  # not a pytest test class, despite the name
    model_config = _CONFIG

    test_id: str
    """pytest node id, e.g. `tests/test_calc.py::TestAdd::test_negative[1-2]`; for a collection
    error, the file that could not be collected."""
    outcome: Literal["failed", "error"]
    """`failed`: an assertion or exception in the test; `error`: in a fixture, setup, teardown
    or while collecting."""
    file: str
    """The test's file, relative to the root."""
    line: int
    """1-based line in `file` where the test failed (the deepest traceback entry in that file),
    else the line of the test's definition, 0 when unknown."""
    message: str
    """The exception line, e.g. `AssertionError: assert 3 == 4`."""
    traceback: str
    """The traceback in pytest's short form, trimmed to its last lines."""
    failure_class: SetupClass | None = None
    """For a test file that could not be collected: `env.setup` when a module it imports is
    neither installed nor part of the project, else `test.collection_error`. None for tests."""


class SetupProblem(BaseModel):
    """What kept the suite (or part of it) from running, for a report to name."""

    model_config = _CONFIG

    failure_class: SetupClass
    message: str
    """One paragraph: what failed and what to do; for a failed build, the step and the log's tail."""
    module: str | None = None
    """The module that could not be imported, when that is the problem."""
    file: str | None = None
    """The root-relative file whose import failed (a test module, a conftest.py)."""
    step: str | None = None
    """For a failed environment build: the step that failed."""
    missing: str | None = None
    """For a failed environment build: the requirement the package index does not have."""


class TestRunOutput(BaseModel):
    """What a pytest run in the sandbox found."""

    __test__ = False
    model_config = _CONFIG

    passed: int
    failed: int
    errors: int
    skipped: int
    """Skipped and xfailed tests."""
    failures: list[TestFailure]
    """Failed and erroring tests, at most 1000, in report order; after the first 50 each with the
    last traceback entry and its exception only."""
    exit_code: int | None
    """pytest's exit status: 0 all passed, 1 some failed, 2 interrupted, 3 internal error, 4 usage
    error, 5 no tests collected; None when the sandbox killed it (see timed_out, output_tail)."""
    timed_out: bool
    """The run passed its timeout and was killed; the counts then stay 0 (no report is written)."""
    report_found: bool
    """Whether pytest wrote a usable report; when false the counts are 0 and output_tail (or
    report_error) says why."""
    output_tail: str
    """The last lines of pytest's output (stdout, then stderr)."""
    python: str
    """The interpreter that ran pytest."""
    backend: Literal["gvisor", "process"]
    warning: str | None = None
    """Set when the weaker process backend ran it: why, and what isolation was missing."""
    duration_s: float
    report_error: str | None = None
    """Why the report at pytest's report path could not be used (too large, not a regular file,
    not JUnit XML, declaring a DTD or entities); None when it was read or none was written."""
    environment: EnvironmentInfo | None = None
    """The project environment pytest ran in (its key, what its recipe came from, the Python,
    whether this run had to build it and how long that took); None: codeloop's own interpreter."""
    setup_error: SetupProblem | None = None
    """Why the suite could not run, when it could not: the environment could not be built
    (`env.setup`, naming the step and the log's tail), or no test could be imported (`env.setup`
    for a missing module, `test.collection_error` for the project's own code), naming the module
    and the file. None when tests ran (or the suite simply has none)."""
    coverage: TestCoverage | None = None
    """With `coverage_files`: per test, the lines of those files it executed, and every test's
    outcome (`test_coverage`); None for a plain run."""


class ReportError(ValueError):
    """The JUnit report cannot be used; the message says why."""


class JunitCounts(BaseModel):
    model_config = _CONFIG
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0


def parse_junit(
    xml_text: str, *, root_prefixes: tuple[str, ...] = ()
) -> tuple[JunitCounts, list[TestFailure]]:
    """Counts and failures of a pytest `xunit1` JUnit report.

    `root_prefixes` are absolute spellings of the workspace (e.g. `/workspace/`) stripped from
    paths in tracebacks so every path is relative to the root.

    Raises:
        ReportError: the text is too large, not a JUnit XML report, or declares a DTD or entities.
    """
    if len(xml_text) > MAX_REPORT_BYTES:
        raise ReportError(f"the JUnit report is over {MAX_REPORT_BYTES} characters; not read")
    try:
        tree = SafeET.fromstring(xml_text, forbid_dtd=True)
    except ET.ParseError as exc:
        raise ReportError(f"unreadable JUnit report: {exc}") from exc
    except DefusedXmlException as exc:
        raise ReportError(
            f"the JUnit report declares a DTD or entities, which pytest's never does; refused ({exc})"
        ) from exc
    try:
        return _read_tree(tree, root_prefixes)
    except ValueError as exc:  # a count that is not a number
        raise ReportError(f"malformed JUnit report: {exc}") from exc


def read_junit_file(path: Path) -> str | None:
    """The text of the report pytest wrote at `path`; None when there is none.

    Raises:
        ReportError: it is not a regular file (a link, a FIFO...) or is over `MAX_REPORT_BYTES`.
    """
    try:
        # O_NONBLOCK: opening a FIFO planted at the path must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:  # pytest never got as far as writing it
        return None
    except OSError as exc:  # ELOOP: a symbolic link at the report's path
        raise ReportError(
            f"the JUnit report at {path.name} cannot be opened as a file: {exc.strerror}"
        ) from exc
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ReportError(f"the JUnit report at {path.name} is not a regular file; not read")
        if info.st_size > MAX_REPORT_BYTES:
            raise ReportError(f"the JUnit report is {info.st_size} bytes, over {MAX_REPORT_BYTES}; not read")
        data = file.read(MAX_REPORT_BYTES + 1)  # it may still grow while read
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError(f"the JUnit report is over {MAX_REPORT_BYTES} bytes; not read")
    return data.decode(errors="replace")


def _read_tree(tree: ET.Element, root_prefixes: tuple[str, ...]) -> tuple[JunitCounts, list[TestFailure]]:
    suites = [tree] if tree.tag == "testsuite" else tree.findall("testsuite")
    counts = JunitCounts()
    failures: list[TestFailure] = []
    for suite in suites:
        total = int(suite.get("tests", 0))
        failed, errors, skipped = (int(suite.get(k, 0)) for k in ("failures", "errors", "skipped"))
        counts.failed += failed
        counts.errors += errors
        counts.skipped += skipped
        counts.passed += max(0, total - failed - errors - skipped)
        for case in suite.iter("testcase"):
            for element in case:
                if element.tag in ("failure", "error") and len(failures) < MAX_FAILURES:
                    failure = _failure(case, element, root_prefixes)
                    if len(failures) >= FULL_TRACEBACKS:
                        failure = failure.model_copy(update={"traceback": _short(failure.traceback)})
                    failures.append(failure)
    return counts, failures


def _short(traceback: str) -> str:
    """The traceback from its last entry — where it was raised, then the exception — cut at
    `SHORT_TRACEBACK_CHARS`; its end when it has no entry."""
    entries = list(_LOCATION.finditer(traceback))
    if not entries:
        return traceback[-SHORT_TRACEBACK_CHARS:]
    return traceback[entries[-1].start() :][:SHORT_TRACEBACK_CHARS]


def _failure(case: ET.Element, problem: ET.Element, prefixes: tuple[str, ...]) -> TestFailure:
    file = relative_path(case.get("file", ""), prefixes)
    classname, name = case.get("classname", ""), case.get("name", "")
    text = relative_text(problem.text or "", prefixes)
    if not classname:  # a collection error: pytest names the module, dotted, as the test
        test_id = file or name
    else:
        module = file.removesuffix(".py").replace("/", ".")
        classes = classname[len(module) :].strip(".").split(".") if classname.startswith(module) else []
        test_id = "::".join([file or classname, *[c for c in classes if c], name])
    in_file = [int(m["line"]) for m in _LOCATION.finditer(text) if m["path"] == file]
    if in_file:
        line = in_file[-1]
    else:
        # xunit1's `line` is the 0-based line of the test's `def`.
        line = int(case.get("line")) + 1 if case.get("line", "").isdigit() else 0  # pyright: ignore[reportArgumentType] - the line attribute was checked to be digits just before
    return TestFailure(
        test_id=test_id,
        outcome="failed" if problem.tag == "failure" else "error",
        file=file,
        line=line,
        message=_message(problem.get("message", ""), text),
        traceback=_trim(text),
    )


def _message(attribute: str, text: str) -> str:
    """The exception line: pytest's `E   ` lines when present, else the report's message."""
    e_lines = [
        line[4:] if line.startswith("E   ") else line[1:].strip()
        for line in text.splitlines()
        if line.startswith("E ")
    ]
    message = "\n".join(e_lines) if e_lines else attribute
    return message[:MESSAGE_CHARS]


def _trim(text: str) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) > TRACEBACK_LINES:
        lines = [f"[... {len(lines) - TRACEBACK_LINES} lines trimmed ...]", *lines[-TRACEBACK_LINES:]]
    trimmed = "\n".join(lines)
    return trimmed if len(trimmed) <= TRACEBACK_CHARS else "[...]" + trimmed[-TRACEBACK_CHARS:]


def output_tail(stdout: str, stderr: str, *, lines: int = 60, chars: int = 6000) -> str:
    """The last `lines` lines (at most `chars` characters) of the combined output."""
    combined = stdout.rstrip() + ("\n" + stderr.rstrip() if stderr.strip() else "")
    tail = "\n".join(combined.splitlines()[-lines:])
    return tail[-chars:]
