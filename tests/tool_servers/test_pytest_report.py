"""The JUnit report `run_tests` reads is written by the code under test: a hostile or huge one is a
clear `ReportError`, quickly, never a hang, a memory blow-up or a read outside the workspace."""

import os
import time
from pathlib import Path

import pytest

from tool_servers.exec.pytest_report import (
    FULL_TRACEBACKS,
    MAX_REPORT_BYTES,
    SHORT_TRACEBACK_CHARS,
    ReportError,
    parse_junit,
    read_junit_file,
)

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="2">
<testcase classname="tests.test_calc" name="test_ok" file="tests/test_calc.py" line="3"/>
<testcase classname="tests.test_calc" name="test_bad" file="tests/test_calc.py" line="6">
<failure message="assert 4 == 5">tests/test_calc.py:8: in test_bad
E   assert 4 == 5</failure></testcase></testsuite></testsuites>
"""

# Ten levels of ten: a billion "lol"s, gigabytes once expanded by a parser that allows entities.
BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE testsuites [\n<!ENTITY lol0 "lol">\n'
    + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">\n' for i in range(1, 10))
    + ']>\n<testsuites><testsuite name="&lol9;" tests="1"/></testsuites>\n'
)
EXTERNAL_ENTITY = (
    '<?xml version="1.0"?>\n<!DOCTYPE t [<!ENTITY secret SYSTEM "file:///etc/passwd">]>\n'
    '<testsuite tests="1"><testcase name="x"><failure>&secret;</failure></testcase></testsuite>\n'
)


def test_a_real_report_is_read_into_counts_and_failures(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text(REPORT)
    counts, failures = parse_junit(read_junit_file(tmp_path / "junit.xml"))  # pyright: ignore[reportArgumentType] - the test's run wrote its junit file
    assert (counts.passed, counts.failed) == (1, 1)
    assert failures[0].test_id == "tests/test_calc.py::test_bad" and failures[0].line == 8


def test_every_failure_of_a_broken_suite_is_listed_the_later_ones_with_where_they_were_raised() -> None:
    """An environment that breaks a whole suite makes hundreds of failures, and the verifier sorts
    each one: all are listed, after the first ones with the end of their traceback only."""
    frames = "".join(f"lib/frame{i}.py:{i}: in f{i}\n    call()\n" for i in range(30))
    cases = "".join(
        f'<testcase classname="tests.test_app" name="test_{i}" file="tests/test_app.py" line="{i}">'
        f'<failure message="DeprecationWarning">tests/test_app.py:{i + 1}: in test_{i}\n{frames}'
        f"/env/site-packages/werkzeug/urls.py:545: in url_parse\n    warn()\nE   DeprecationWarning: old</failure></testcase>"
        for i in range(300)
    )
    counts, failures = parse_junit(f'<testsuite tests="300" failures="300">{cases}</testsuite>')
    assert counts.failed == 300 and len(failures) == 300
    assert failures[-1].test_id == "tests/test_app.py::test_299"
    assert len(failures[0].traceback) > len(failures[FULL_TRACEBACKS].traceback)
    assert failures[FULL_TRACEBACKS].traceback.splitlines() == [
        "/env/site-packages/werkzeug/urls.py:545: in url_parse",
        "    warn()",
        "E   DeprecationWarning: old",
    ]
    assert failures[FULL_TRACEBACKS].message == "DeprecationWarning: old"


def test_a_later_failure_keeps_where_it_was_raised_even_under_a_long_exception() -> None:
    """An exception reported over many lines (a thread's traceback inside a warning) must not push
    its place out of a later failure's short traceback: the place is what its crash is known by."""
    raised = "E   Warning: Exception in thread Thread-5\n" + "".join(
        f"E     File x.py, line {i}\n" for i in range(20)
    )
    cases = "".join(
        f'<testcase classname="tests.test_app" name="test_{i}" file="tests/test_app.py" line="{i}">'
        f"<failure>tests/test_app.py:{i + 1}: in test_{i}\n"
        f"/env/site-packages/_pytest/threadexception.py:75: in hook\n    warn()\n{raised}</failure></testcase>"
        for i in range(FULL_TRACEBACKS + 1)
    )
    _, failures = parse_junit(
        f'<testsuite tests="{FULL_TRACEBACKS + 1}" failures="{FULL_TRACEBACKS + 1}">{cases}</testsuite>'
    )
    short = failures[FULL_TRACEBACKS].traceback
    assert len(short) <= SHORT_TRACEBACK_CHARS and "File x.py, line 19" in short
    assert short.splitlines()[:3] == [
        "/env/site-packages/_pytest/threadexception.py:75: in hook",
        "    warn()",
        "E   Warning: Exception in thread Thread-5",
    ]


@pytest.mark.parametrize("text", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["billion-laughs", "external-entity"])
def test_a_report_declaring_entities_is_refused_at_once(text: str) -> None:
    started = time.monotonic()
    with pytest.raises(ReportError, match="declares a DTD or entities"):
        parse_junit(text)
    assert time.monotonic() - started < 1.0


def test_a_report_that_is_not_xml_says_so() -> None:
    with pytest.raises(ReportError, match="unreadable JUnit report"):
        parse_junit("<testsuite tests='1'><testcase")
    with pytest.raises(ReportError, match="malformed"):
        parse_junit("<testsuite tests='many'/>")


def test_a_huge_report_is_refused_without_being_read(tmp_path: Path) -> None:
    huge = tmp_path / "junit.xml"
    with huge.open("wb") as file:
        file.truncate(MAX_REPORT_BYTES + 1)  # sparse: large to stat, nothing on disk
    with pytest.raises(ReportError, match="over"):
        read_junit_file(huge)
    with pytest.raises(ReportError, match="over"):
        parse_junit(" " * (MAX_REPORT_BYTES + 1))


def test_a_fifo_or_a_link_at_the_report_path_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A FIFO would block a plain open until a writer came; a link could lead out of the workspace."""
    fifo = tmp_path / "fifo.xml"
    os.mkfifo(fifo)
    with pytest.raises(ReportError, match="not a regular file"):
        read_junit_file(fifo)
    (tmp_path / "outside.xml").write_text(REPORT)
    (tmp_path / "link.xml").symlink_to(tmp_path / "outside.xml")
    with pytest.raises(ReportError, match="cannot be opened as a file"):
        read_junit_file(tmp_path / "link.xml")
    assert read_junit_file(tmp_path / "missing.xml") is None
