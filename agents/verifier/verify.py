"""`verify_patch` and `verify_answer`: the verifier's steps in order, in one exec session.

The trees compared (the workspace's HEAD commit is the starting tree B):

- P, the patched tree: B plus the whole patch. Static checks of the changed files, the targeted
  tests, then the whole suite.
- R, the reproduction tree: B plus only the patch's test files (its source changes taken back
  with `git checkout HEAD -- ...`). Only the tests that fail on P and whose starting outcome the
  baseline does not know, and the test files the patch changed, run here. For a test file the
  patch did not touch, R is B, so what it does on R is its starting outcome and goes into the
  baseline; for a test the patch adds or edits, R is the only meaningful "before": the new test
  against the old code, which must fail there to show it reproduces the issue.

Why not a full baseline run: running the whole suite on B as well would double the cost of every
verification. Passing tests need no comparison (a pass is a pass); only a failure needs to know
whether it was there before, so only failures are re-run — and on a revision the baseline already
knows most of them. A clean patch costs one static call, the targeted run and one suite run.
"""

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import anyio

from agents.failures import FailureClass
from agents.tools import ToolProvider
from agents.verifier.answer import check_answer
from agents.verifier.diff_review import ReviewLimits, review_patch
from agents.verifier.errors import WorkspaceError
from agents.verifier.exec_session import ExecSession, ExecUnavailable, TestFailure, TestRun, open_exec_session
from agents.verifier.patchset import FileChange, MalformedPatch, join_sections, parse_patch
from agents.verifier.report import (
    MAX_BASELINE_FINDINGS,
    MAX_BASELINE_TESTS,
    MAX_FAILURES,
    MAX_TEST_ID_CHARS,
    Baseline,
    Check,
    Failure,
    StaticFinding,
    TestOutcome,
    TestOutcomes,
    VerificationReport,
)
from agents.verifier.selection import Selection, is_test_module, select_tests
from agents.verifier.static import as_failures, introduced, to_baseline
from agents.verifier.tree import (
    apply_patch,
    changed_tracked_files,
    check_patch,
    head_commit,
    reset_tracked,
    restore,
)
from agents.verifier.verdict import decide, order_failures

DEADLINE_MARGIN_S = 3.0
"""Kept back from each call's timeout for the sandbox's kill and the report to arrive in time."""
SUITE_ESTIMATE_FACTOR = 1.2
"""The whole suite is skipped when the time left is below this multiple of its last duration."""


def seconds_left(deadline: datetime) -> float:
    return (deadline - datetime.now(UTC)).total_seconds()


@dataclass
class _Run:
    """What one verification has learnt so far."""

    workspace: Path
    changes: list[FileChange]
    deadline: datetime
    baseline: Baseline
    checks: list[Check] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    failing: dict[str, TestFailure] = field(default_factory=dict)
    """Tests failing on the patched tree, by id."""
    tests_run: int = 0
    fixed: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    still_failing: list[str] = field(default_factory=list)
    preexisting: list[str] = field(default_factory=list)
    outcomes: dict[str, TestOutcome] = field(default_factory=dict)
    complete_files: set[str] = field(default_factory=set)
    static_checked: list[str] = field(default_factory=list)
    static_findings: list[StaticFinding] = field(default_factory=list)
    suite_duration_s: float | None = None

    mark: float = field(default_factory=time.monotonic)
    """When the last check ended: each step's time is the time since the previous check."""

    def add_check(self, check: Check) -> None:
        now = time.monotonic()
        self.checks.append(check.model_copy(update={"duration_s": round(now - self.mark, 3)}))
        self.mark = now

    def __post_init__(self) -> None:
        self.outcomes = dict(self.baseline.tests.outcomes)
        self.complete_files = set(self.baseline.tests.complete_files)
        self.static_checked = list(self.baseline.static_checked)
        self.static_findings = list(self.baseline.static_findings)
        self.suite_duration_s = self.baseline.suite_duration_s

    def timeout_s(self) -> float:
        return seconds_left(self.deadline) - DEADLINE_MARGIN_S

    @property
    def src_changes(self) -> list[FileChange]:
        return [c for c in self.changes if not c.is_test]

    @property
    def changed_paths(self) -> set[str]:
        return {p for c in self.changes for p in (c.path, c.old_path) if p}

    def starting_outcome(self, test_id: str) -> TestOutcome | None:
        """What `test_id` did on the starting tree, when known and meaningful for this patch."""
        file = test_id.split("::")[0]
        if file in self.changed_paths:
            return None
        if test_id in self.outcomes:
            return self.outcomes[test_id]
        return "passed" if file in self.complete_files else None

    def new_baseline(self) -> Baseline:
        outcomes = dict(list(self.outcomes.items())[:MAX_BASELINE_TESTS])
        return Baseline(
            commit=self.baseline.commit,
            tests=TestOutcomes(
                outcomes=outcomes,
                complete_files=sorted(self.complete_files)[:MAX_BASELINE_TESTS],
                truncated=self.baseline.tests.truncated or len(outcomes) < len(self.outcomes),
            ),
            static_checked=self.static_checked[:MAX_BASELINE_FINDINGS],
            static_findings=self.static_findings[:MAX_BASELINE_FINDINGS],
            suite_duration_s=self.suite_duration_s,
        )


def _test_failure(cls: FailureClass, failure: TestFailure, note: str = "") -> Failure:
    return Failure(
        failure_class=cls,
        test_id=failure.test_id,
        path=failure.file or failure.test_id.split("::")[0],
        line=failure.line or None,
        message=(failure.message or f"{failure.outcome}") + note,
        stack_summary=failure.traceback,
    )


def _counts(run: TestRun) -> str:
    return f"{run.passed} passed, {run.failed} failed, {run.errors} errors, {run.skipped} skipped in {run.duration_s:.1f} s"


async def _static(run: _Run, session: ExecSession) -> bool:
    """Static checks of the changed Python files; False when the patch does not compile."""
    paths = [
        c.path
        for c in run.changes
        if c.is_python and c.kind != "deleted" and (run.workspace / c.path).is_file()
    ]
    if not paths:
        run.add_check(Check(name="static", ok=True, summary="no changed Python files"))
        return True
    after = await session.run_static_checks(paths, timeout_s=min(run.timeout_s(), 120.0))
    unknown = sorted({f.path for f in after.findings} - set(run.static_checked))
    if unknown:
        # Which of these findings were there before: check the same files on the starting tree.
        back = [c for c in run.changes if c.path in unknown]
        await restore(run.workspace, back)
        existing = [p for p in unknown if (run.workspace / p).is_file()]
        before = (
            await session.run_static_checks(existing, timeout_s=min(run.timeout_s(), 120.0))
            if existing
            else None
        )
        await apply_patch(run.workspace, join_sections(back))
        run.static_checked += unknown
        run.static_findings += to_baseline(before.findings if before else [])
    new = introduced(after.findings, [f for f in run.static_findings if f.path in paths])
    run.failures += as_failures(new)
    syntax = [f for f in new if f.code == "syntax-error"]
    run.add_check(
        Check(
            name="static",
            ok=not new,
            summary=f"{len(paths)} file(s) checked: {len(new)} new finding(s), {len(after.findings) - len(new)} already there",
        )
    )
    return not syntax


def _timed_out(run: _Run, name: str, result: TestRun) -> bool:
    if not result.timed_out:
        return False
    run.failures.append(
        Failure(
            failure_class=FailureClass.TEST_TIMEOUT,
            message=f"{name} did not finish within {result.duration_s:.0f} s (the task's deadline)",
            stack_summary=result.output_tail,
        )
    )
    run.add_check(Check(name=name, ok=False, summary=f"timed out after {result.duration_s:.1f} s"))
    return True


def _pytest_broken(run: _Run, name: str, result: TestRun) -> bool:
    """pytest could not run the selection at all (internal or usage error, no report)."""
    if result.exit_code in (0, 1, 5) and (result.report_found or result.exit_code == 5):
        return False
    run.failures.append(
        Failure(
            failure_class=FailureClass.ENV_SETUP,
            message=f"pytest could not run ({name}, exit {result.exit_code})",
            stack_summary=result.output_tail,
        )
    )
    run.add_check(Check(name=name, ok=False, summary=f"pytest exit {result.exit_code}: no test report"))
    return True


def _missing(selection: Selection) -> str:
    if not selection.missing_targets:
        return ""
    return f"; plan targets not found: {', '.join(selection.missing_targets[:5])}"


async def _tests(run: _Run, session: ExecSession, selection: Selection, *, full_suite: bool) -> None:
    targeted_failed = False
    if selection.files:
        result = await session.run_tests(selection.files, timeout_s=run.timeout_s())
        if _timed_out(run, "targeted_tests", result) or _pytest_broken(run, "targeted_tests", result):
            return
        run.tests_run += result.total
        run.failing.update({f.test_id: f for f in result.failures})
        targeted_failed = bool(result.failures)
        run.add_check(
            Check(
                name="targeted_tests",
                ok=not targeted_failed,
                summary=f"{len(selection.files)} file(s): {_counts(result)}{_missing(selection)}",
            )
        )
    else:
        run.add_check(Check(name="targeted_tests", ok=True, summary=f"none selected{_missing(selection)}"))
    if targeted_failed:
        run.add_check(Check(name="full_suite", ok=False, summary="not run: targeted tests failed"))
    elif not full_suite:
        run.add_check(Check(name="full_suite", ok=True, summary="not run: not asked for"))
    elif run.suite_duration_s is not None and run.timeout_s() < run.suite_duration_s * SUITE_ESTIMATE_FACTOR:
        run.add_check(
            Check(
                name="full_suite",
                ok=False,
                summary=f"not run: {run.timeout_s():.0f} s left, the suite takes {run.suite_duration_s:.0f} s",
            )
        )
    else:
        result = await session.run_tests([], timeout_s=run.timeout_s())
        if _timed_out(run, "full_suite", result) or _pytest_broken(run, "full_suite", result):
            return
        run.suite_duration_s = run.suite_duration_s or result.duration_s
        run.tests_run = max(run.tests_run, result.total)
        run.failing.update({f.test_id: f for f in result.failures})
        run.add_check(Check(name="full_suite", ok=not result.failures, summary=_counts(result)))
    await _compare(run, session, selection)


async def _compare(run: _Run, session: ExecSession, selection: Selection) -> None:
    """Sort the patched tree's failures into regressions, still failing and pre-existing, running
    on the reproduction tree what the baseline does not know (see the module docstring)."""
    unknown = {
        tid for tid in run.failing if run.starting_outcome(tid) is None and not selection.is_task_test(tid)
    }
    files = sorted(
        {tid.split("::")[0] for tid in unknown} | set(selection.changed_test_files if run.src_changes else [])
    )
    before: dict[str, TestFailure] = {}
    resolved = True
    if files and run.src_changes:
        await restore(run.workspace, run.src_changes)
        try:
            result = await session.run_tests(files, timeout_s=run.timeout_s())
        finally:
            await apply_patch(run.workspace, join_sections(run.src_changes))
        resolved = not (result.timed_out or result.truncated or not result.report_found)
        before = {f.test_id: f for f in result.failures}
        summary = f"{len(files)} file(s) without the patch's source changes: {_counts(result)}"
        run.add_check(Check(name="baseline", ok=resolved, summary=summary))
        if resolved:
            _remember(run, files, before)
    elif files:  # a patch of tests only: the reproduction tree is the patched tree
        before = dict(run.failing)
    for tid, failure in sorted(run.failing.items()):
        if selection.is_task_test(tid):
            known = run.starting_outcome(tid)
            if known == "passed":
                run.regressions.append(tid)
                run.failures.append(
                    _test_failure(FailureClass.TEST_REGRESSION, failure, " (passed before the patch)")
                )
            else:
                run.still_failing.append(tid)
                run.failures.append(_test_failure(FailureClass.TEST_STILL_FAILING, failure))
            continue
        known = run.starting_outcome(tid)
        if known is None and tid.split("::")[0] in files and resolved:
            known = "failed" if tid in before else "passed"
        if known in ("failed", "error"):
            run.preexisting.append(tid)
        else:
            note = "" if known == "passed" else " (its outcome before the patch could not be checked)"
            run.regressions.append(tid)
            run.failures.append(_test_failure(FailureClass.TEST_REGRESSION, failure, note))
    _fixed_and_reproduction(run, selection, before, resolved)


def _remember(run: _Run, files: list[str], before: dict[str, TestFailure]) -> None:
    """Outcomes on the reproduction tree of test files the patch did not touch are starting outcomes,
    unless the patch changed test code other files share (a conftest.py, a helper under tests/):
    then the reproduction tree differs from the starting tree for every test, and nothing is kept."""
    if any(c.is_test and not is_test_module(c.path) for c in run.changes):
        return
    for file in files:
        if file in run.changed_paths:
            continue
        run.complete_files.add(file)
        for tid, failure in before.items():
            if tid.split("::")[0] == file and len(tid) <= MAX_TEST_ID_CHARS:
                run.outcomes[tid] = failure.outcome


def _fixed_and_reproduction(
    run: _Run, selection: Selection, before: dict[str, TestFailure], resolved: bool
) -> None:
    # Every file run on the reproduction tree ran on the patched tree too (targeted or failing there).
    run.fixed += [tid for tid in before if tid not in run.failing]
    for tid, outcome in run.outcomes.items():
        if (
            outcome != "passed"
            and tid not in run.failing
            and selection.is_task_test(tid)
            and tid not in run.fixed
        ):
            run.fixed.append(tid)
    if not (run.src_changes and selection.changed_test_files) or not resolved:
        return
    reproducing = [t for t in before if t.split("::")[0] in selection.changed_test_files]
    ok = bool(reproducing) or bool(run.fixed)
    run.add_check(
        Check(
            name="reproduction",
            ok=ok,
            summary=f"{len(reproducing)} test(s) the patch adds or changes fail without its source changes",
        )
    )
    if not ok:
        run.failures.append(
            Failure(
                failure_class=FailureClass.TEST_NO_REPRODUCTION,
                path=selection.changed_test_files[0],
                message="the tests the patch adds or changes pass without its source changes too",
            )
        )


def _report(run: _Run, *, started: float, judged: bool | None = None) -> VerificationReport:
    failures = order_failures(run.failures)[:MAX_FAILURES]
    verdict = decide(failures, judged=run.tests_run > 0 if judged is None else judged)
    if verdict == "unverified" and not any(f.severity == "error" for f in failures):
        failures.append(
            Failure(
                failure_class=FailureClass.VERIFY_UNVERIFIABLE,
                message="no tests ran: nothing could check the patch",
            )
        )
    errors = [f for f in failures if f.severity == "error"]
    reason = (
        f"{len(errors)} failure(s), first {errors[0].failure_class}: {errors[0].message}" if errors else ""
    )
    summary = f"{verdict}: {reason or f'{run.tests_run} test outcome(s), nothing wrong found'}"
    return VerificationReport(
        verdict=verdict,
        checks=run.checks,
        failures=failures,
        fixed=sorted(run.fixed),
        regressions=run.regressions,
        still_failing=run.still_failing,
        preexisting=run.preexisting,
        files_changed=[c.path for c in run.changes],
        tests_run=run.tests_run,
        duration_s=round(time.monotonic() - started, 3),
        summary=summary,
    )


async def verify_patch(
    *,
    workspace: Path,
    patch: str,
    plan_files: list[str],
    test_targets: list[str],
    mode: str,
    tools: ToolProvider,
    deadline: datetime,
    baseline: Baseline | None,
    limits: ReviewLimits = ReviewLimits(),
    full_suite: bool = True,
) -> tuple[VerificationReport, Baseline]:
    """Judge `patch` against the starting tree in `workspace`; see the package docstring.

    Raises:
        WorkspaceError: the workspace is not a git repository with a commit, or git failed.
    """
    started = time.monotonic()
    commit = await head_commit(workspace)
    if baseline is None or baseline.commit != commit:
        baseline = Baseline(commit=commit)
    run = _Run(workspace=workspace, changes=[], deadline=deadline, baseline=baseline)

    def early(
        cls: FailureClass, message: str, path: str | None = None
    ) -> tuple[VerificationReport, Baseline]:
        run.failures.append(Failure(failure_class=cls, path=path, message=message))
        run.add_check(Check(name="patch", ok=False, summary=message))
        return _report(run, started=started, judged=True), run.new_baseline()

    dirty = await changed_tracked_files(workspace)
    if dirty:
        return early(
            FailureClass.ENV_INFRA,
            f"the workspace is not at its starting tree: {len(dirty)} file(s) differ from HEAD",
        )
    try:
        run.changes = parse_patch(patch)
    except MalformedPatch as exc:
        return early(FailureClass.PATCH_MALFORMED, str(exc))
    if not run.changes:
        return early(FailureClass.PATCH_EMPTY, "the patch changes nothing")
    run.failures += review_patch(run.changes, plan_files=plan_files, mode=mode, limits=limits)
    review_errors = [f for f in run.failures if f.severity == "error"]
    run.add_check(
        Check(
            name="diff_review",
            ok=not review_errors,
            summary=f"{len(run.changes)} file(s): {len(review_errors)} problem(s), {len(run.failures) - len(review_errors)} warning(s)",
        )
    )
    if any(
        f.failure_class == FailureClass.PATCH_PROTECTED_PATH and f.path and ".git" in Path(f.path).parts
        for f in review_errors
    ):
        return early(FailureClass.PATCH_PROTECTED_PATH, "not applied: the patch writes into .git/")
    why = await check_patch(workspace, patch)
    if why is not None:
        return early(FailureClass.PATCH_APPLY_FAILED, why.splitlines()[-1] if why else "does not apply")
    if seconds_left(deadline) <= DEADLINE_MARGIN_S:
        return early(FailureClass.BUDGET_WALL, "the deadline passed before verification could start")
    await apply_patch(workspace, patch)
    run.add_check(
        Check(name="patch", ok=True, summary=f"applies to {commit[:12]}: {len(run.changes)} file(s)")
    )
    try:
        with anyio.move_on_after(seconds_left(deadline)) as scope:
            target = tools.servers(workspace, frozenset({"read", "execute"}))["exec"]
            async with open_exec_session(target) as session:
                if await _static(run, session):
                    selection = select_tests(workspace, run.changes, test_targets)
                    await _tests(run, session, selection, full_suite=full_suite)
                else:
                    run.add_check(
                        Check(name="targeted_tests", ok=False, summary="not run: the patch does not compile")
                    )
        if scope.cancelled_caught:
            run.failures.append(
                Failure(
                    failure_class=FailureClass.TEST_TIMEOUT,
                    message="verification did not finish before the task's deadline",
                )
            )
    except ExecUnavailable as exc:
        run.failures.append(Failure(failure_class=FailureClass.ENV_INFRA, message=str(exc)))
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(60):
            await restore(workspace, run.changes)
            # A test run may have written to tracked files too; the next verification needs HEAD.
            await reset_tracked(workspace)
    return _report(run, started=started), run.new_baseline()


async def verify_answer(*, workspace: Path, answer: str) -> VerificationReport:
    """Check a read-mode answer's citations against the tree in `workspace`."""
    return await anyio.to_thread.run_sync(check_answer, workspace, answer)


__all__ = ["WorkspaceError", "verify_answer", "verify_patch"]
