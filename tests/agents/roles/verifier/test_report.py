"""The verifier's wire models."""

from agents.failures import FailureClass
from agents.feedback import revision_feedback
from agents.messages.verification import MESSAGE_CHARS, Check, Failure, VerificationReport


def test_a_report_dumps_to_a_superset_of_the_result_objects_verification() -> None:
    """Our CLI contract: `verification: {verdict, checks: [{name, ok, summary}], failures:
    [{failure_class, test_id, path, line, message}]}` is readable from the dumped report."""
    report = VerificationReport(
        verdict="failed",
        checks=[Check(name="full_suite", ok=False, summary="1 failed")],
        failures=[
            Failure(
                failure_class=FailureClass.TEST_REGRESSION,
                test_id="tests/test_a.py::test_b",
                path="tests/test_a.py",
                line=3,
                message="AssertionError: assert 1 == 2",
            )
        ],
    )
    dumped = report.model_dump(mode="json")
    assert dumped["verdict"] == "failed"
    assert set(dumped["checks"][0]) >= {"name", "ok", "summary"}
    assert dumped["failures"][0]["failure_class"] == "test.regression"
    assert set(dumped["failures"][0]) >= {"failure_class", "test_id", "path", "line", "message"}
    assert VerificationReport.model_validate_json(report.model_dump_json()) == report


def test_messages_are_kept_to_one_trimmed_line() -> None:
    """A failure's message is one line: long or multi-line text is trimmed, not refused."""
    failure = Failure(failure_class=FailureClass.STATIC_LINT, message="first line\n" + "x" * 1000)
    assert failure.message == "first line ..."
    long = Failure(failure_class=FailureClass.STATIC_LINT, message="y" * 1000)
    assert len(long.message) == MESSAGE_CHARS


def test_feedback_puts_test_failures_before_warnings_and_other_findings() -> None:
    """Revision feedback leads with failing test ids and locations."""
    report = VerificationReport(
        verdict="failed",
        summary="2 failures",
        failures=[
            Failure(
                failure_class=FailureClass.PATCH_OUT_OF_SCOPE,
                path="x.py",
                message="outside",
                severity="warning",
            ),
            Failure(failure_class=FailureClass.PATCH_SECRET, path="k.py", line=2, message="a key"),
            Failure(
                failure_class=FailureClass.TEST_STILL_FAILING,
                test_id="tests/t.py::test_x",
                path="tests/t.py",
                line=7,
                message="assert 0",
                stack_summary="tests/t.py:7: in test_x\n    assert 0\nE   assert 0",
            ),
        ],
    )
    lines = revision_feedback(report).splitlines()
    assert lines[1].startswith("- [test.still_failing] tests/t.py::test_x at tests/t.py:7")
    assert "E   assert 0" in lines[2] or "E   assert 0" in "\n".join(lines[2:5])
    assert lines[-1].startswith("- [patch.out_of_scope]") and "(warning)" in lines[-1]
