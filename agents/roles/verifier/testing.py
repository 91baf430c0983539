"""The test steps: the targeted tests, the whole suite, the comparison with the starting tree, and
the evidence that the task's problem is gone.

The targeted tests run first (`selection`); when one fails the verifier stops there and reports,
so the coder hears of it after one short run. Otherwise the whole suite runs, if the deadline
allows. Then each failure on the patched tree is sorted. A *target* that fails is the patch's
failure whatever it did before (`test.still_failing`, or `test.regression` when it passed): a
task test (`Selection.is_task_test`), any other test of a test file the patch changed, or a test
whose traceback runs through the source the patch changed — unless it failed before with the
same crash, one the environment causes (`environment_failures`: listed as pre-existing). Any
other failing test is compared
with its outcome on the starting tree — known from the baseline, or found by running its file on
the reproduction tree (see `agents.roles.verifier.verify`) — and listed as pre-existing, unblamed, when
it failed there too.

A clean run is not enough to pass: something must show the problem gone. That is a target that
failed on the starting tree (or, for a test the patch adds or edits, on the reproduction tree)
and passes with the patch; the targets' files whose starting outcome is unknown are run on the
reproduction tree to find out. Without it the report carries `test.no_reproduction`, saying what
was missing, and the verdict is `unverified`.
"""

import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

from agents.failures import FailureClass
from agents.messages.verification import Check, Failure
from agents.roles.verifier.environment_failures import (
    crash_of,
    crashes_outside,
    environmental,
    systemic_crashes,
    unchanged,
)
from agents.roles.verifier.example import (
    EXAMPLE_TIMEOUT_S,
    ExampleCache,
    TaskExample,
    behaviour_of,
    compare,
)
from agents.roles.verifier.exec_session import Crash, ExecSession, TestFailure, TestRun
from agents.roles.verifier.measure import Measurement, measure_starting_tree
from agents.roles.verifier.patchset import FileChange, join_sections
from agents.roles.verifier.selection import Selection
from agents.roles.verifier.state import Verification
from agents.roles.verifier.test_modules import is_test_module
from agents.roles.verifier.tree import apply_patch, restore

SUITE_ESTIMATE_FACTOR = 1.2
"""The whole suite is skipped when the time left is below this multiple of its last duration."""


def _test_failure(cls: FailureClass, failure: TestFailure, note: str = "") -> Failure:
    if failure.failure_class in (FailureClass.ENV_SETUP, FailureClass.TEST_COLLECTION_ERROR):
        # A test module that cannot be imported: what keeps it from importing is the finding.
        cls = FailureClass(failure.failure_class)
        note = f" ({failure.test_id} cannot be imported)"
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


def timeout_failure(name: str, ran_s: float, suite_s: float | None, output: str = "") -> Failure:
    """The finding of the run `name` the task's deadline stopped after `ran_s`: the patch's
    (`test.timeout`: it hangs or crawls) unless the whole suite took longer than that on the
    starting tree (`suite_s`) — then the tests may simply need more time than was left, which
    shows nothing about the patch (`verify.unverifiable`)."""
    if suite_s is not None and ran_s < suite_s:
        return Failure(
            failure_class=FailureClass.VERIFY_UNVERIFIABLE,
            message=(
                f"{name} did not finish in the {ran_s:.0f} s left before the task's deadline; "
                f"the suite took {suite_s:.0f} s on the starting tree: the deadline came first"
            ),
            stack_summary=output,
        )
    return Failure(
        failure_class=FailureClass.TEST_TIMEOUT,
        message=f"{name} did not finish within {ran_s:.0f} s (the task's deadline)",
        stack_summary=output,
    )


def deadline_failure(run: Verification) -> Failure:
    """The finding when the task's deadline stopped the verification: nothing about the patch
    while the starting tree's own runs were still going (`verify.unverifiable`); after, as
    `timeout_failure` judges the time spent on the patched tree."""
    if run.patched_since is None:
        return Failure(
            failure_class=FailureClass.VERIFY_UNVERIFIABLE,
            message="the task's deadline came during the starting tree's runs, before any test ran with the patch",
        )
    return timeout_failure("verification", time.monotonic() - run.patched_since, run.known.suite_duration_s)


def _timed_out(run: Verification, name: str, result: TestRun) -> bool:
    if not result.timed_out:
        return False
    run.failures.append(
        timeout_failure(name, result.duration_s, run.known.suite_duration_s, result.output_tail)
    )
    run.add_check(Check(name=name, ok=False, summary=f"timed out after {result.duration_s:.1f} s"))
    return True


def _pytest_broken(run: Verification, name: str, result: TestRun) -> bool:
    """pytest could not run the selection at all (the environment could not be built, no test
    could be imported, an internal or usage error: no report)."""
    if result.setup_error is not None:
        problem = result.setup_error
        cls = (
            FailureClass.TEST_COLLECTION_ERROR
            if problem.failure_class == FailureClass.TEST_COLLECTION_ERROR
            else FailureClass.ENV_SETUP
        )
        run.failures.append(
            Failure(
                failure_class=cls,
                path=problem.file,
                message=problem.message,
                stack_summary=result.output_tail,
            )
        )
        run.add_check(Check(name=name, ok=False, summary=f"could not run: {problem.message}"))
        return True
    if result.exit_code in (0, 1, 5) and (result.report_found or result.exit_code == 5):
        return False
    # Killed at the CPU time limit: the patch's doing (a loop) when the starting tree's suite ran
    # to its end under the same limit, else the limit is too low for this suite.
    spun = "CPU time" in (result.killed or "") and run.reach is not None
    run.failures.append(
        Failure(
            failure_class=FailureClass.TEST_TIMEOUT if spun else FailureClass.ENV_SETUP,
            message=f"pytest could not run ({name}, exit {result.exit_code})"
            + (f": {result.killed}" if result.killed else ""),
            stack_summary=result.output_tail,
        )
    )
    why = result.killed or "no test report"
    run.add_check(Check(name=name, ok=False, summary=f"pytest exit {result.exit_code}: {why}"))
    return True


def _missing(selection: Selection) -> str:
    if not selection.missing_targets:
        return ""
    return f"; plan targets not found: {', '.join(selection.missing_targets[:5])}"


@dataclass(frozen=True)
class ExampleCheck:
    """The task's example, to run on the starting tree `tree` (kept in `cache`) and with the patch."""

    example: TaskExample
    tree: str
    cache: ExampleCache | None = None


async def run_tests(
    run: Verification,
    session: ExecSession,
    selection: Selection,
    *,
    full_suite: bool,
    example: ExampleCheck | None = None,
    measurement: Measurement | None = None,
) -> None:
    """The targeted tests, then (unless they showed the patch wrong) the whole suite; each run's
    new failures sorted at once, the evidence last (flips confirmed, then the task's `example`).
    With a `measurement`, the tests that execute the changed code (found on the starting tree
    first, `measure`) join the targeted tests, and the rest of the suite need not run."""
    if measurement is not None:
        # In a suite too large to run whole, "the suite" is the changed packages' tests, measured
        # or not (a test command without per-test coverage).
        run.measured_scope = measurement.scope
        run.reach = await measure_starting_tree(run, session, measurement)
        if run.reach is not None:
            run.run_all = run.reach.at_import or bool(measurement.probes.unmeasured)
            selection = _widened(run, selection)
    run.patched_since = time.monotonic()
    if run.run_all:
        scoped = _scoped_files(run, selection)
        result = await session.run_tests(scoped or [], timeout_s=run.timeout_s())
        if _timed_out(run, "targeted_tests", result) or _pytest_broken(run, "targeted_tests", result):
            return
        _note_environment(run, result)
        run.tests_run += result.total
        run.suite_ran = scoped is None
        run.ran_files.update(scoped or ())
        why = (
            "a changed line runs at import"
            if run.reach and run.reach.at_import
            else "unmeasured files changed"
        )
        run.add_check(
            Check(
                name="targeted_tests",
                ok=not result.failures,
                summary=f"{'the measured tests' if scoped else 'the whole suite'} ({why}): {_counts(result)}",
            )
        )
        await _sort_failures(run, session, selection, result.failures, reproduce=selection.changed_test_files)
    elif selection.files:
        result = await session.run_tests(selection.files, timeout_s=run.timeout_s())
        if _timed_out(run, "targeted_tests", result) or _pytest_broken(run, "targeted_tests", result):
            return
        _note_environment(run, result)
        run.tests_run += result.total
        run.ran_files.update(selection.files)
        summary = f"{len(selection.files)} file(s): {_counts(result)}{_missing(selection)}"
        run.add_check(Check(name="targeted_tests", ok=not result.failures, summary=summary))
        await _sort_failures(run, session, selection, result.failures, reproduce=selection.changed_test_files)
    else:
        run.add_check(Check(name="targeted_tests", ok=True, summary=f"none selected{_missing(selection)}"))
    if run.regressions or run.still_failing:
        run.add_check(Check(name="full_suite", ok=False, summary="not run: targeted tests failed"))
    elif run.run_all:
        pass  # the targeted run was the whole suite
    elif run.reach is not None:
        others = len(run.known.complete_files - run.ran_files)
        why = f"not run: the other {others} test file(s) execute none of the changed code, so their outcome is the starting tree's"
        scope = run.measured_scope
        if scope is not None and scope.files is not None:
            why += f"; the suite's {scope.suite_files - len(scope.files)} test modules outside the changed packages were not run (too large a suite to run whole)"
        run.add_check(Check(name="full_suite", ok=True, summary=why))
    elif selection.covers_suite:
        run.add_check(
            Check(name="full_suite", ok=True, summary="not run: the targeted tests are the whole suite")
        )
    elif not full_suite:
        run.add_check(Check(name="full_suite", ok=True, summary="not run: not asked for"))
    elif (
        run.known.suite_duration_s is not None
        and run.timeout_s() < run.known.suite_duration_s * SUITE_ESTIMATE_FACTOR
    ):
        why = f"not run: {run.timeout_s():.0f} s left, the suite takes {run.known.suite_duration_s:.0f} s"
        run.add_check(Check(name="full_suite", ok=False, summary=why))
        # Whatever the targeted tests showed, regressions elsewhere went unchecked: not a pass.
        run.failures.append(
            Failure(failure_class=FailureClass.VERIFY_UNVERIFIABLE, message=f"the whole suite was {why}")
        )
    else:
        scoped = _scoped_files(run, selection)
        result = await session.run_tests(scoped or [], timeout_s=run.timeout_s())
        if _timed_out(run, "full_suite", result) or _pytest_broken(run, "full_suite", result):
            return
        if scoped is None:
            run.known.suite_duration_s = run.known.suite_duration_s or result.duration_s
        run.tests_run = max(run.tests_run, result.total)
        run.suite_ran = scoped is None
        run.ran_files.update(scoped or ())
        where = f" ({run.measured_scope.describe()})" if scoped and run.measured_scope else ""
        run.add_check(Check(name="full_suite", ok=not result.failures, summary=_counts(result) + where))
        new = [f for f in result.failures if f.test_id not in run.failing]
        await _sort_failures(run, session, selection, new, reproduce=[])
    if run.reach is not None:
        _inferred_preexisting(run)
    await _evidence(run, session, selection, example)
    if run.preexisting and not (run.regressions or run.still_failing):
        _clear_test_checks(run)


def _scoped_files(run: Verification, selection: Selection) -> list[str] | None:
    """In a suite too large to run whole (`scope`), what "every test" means: the measured scope
    with the targeted files; None: the whole suite."""
    scope = run.measured_scope
    if scope is None or scope.files is None:
        return None
    return list(dict.fromkeys([*scope.files, *selection.files]))


def _inferred_preexisting(run: Verification) -> None:
    """The tests failing on the starting tree that were not run with the patch: they execute none
    of the changed code, so they fail with it too — listed, never blamed."""
    for tid, outcome in sorted(run.known.outcomes.items()):
        ran = run.suite_ran or tid.split("::")[0] in run.ran_files
        if outcome != "passed" and not ran and tid not in run.preexisting:
            run.preexisting.append(tid)


def _note_environment(run: Verification, result: TestRun) -> None:
    run.environment = result.environment or run.environment


def _widened(run: Verification, selection: Selection) -> Selection:
    """The selection with the files of the tests that execute the changed code (and, when the task
    asks for a green suite, of every test failing on the starting tree)."""
    assert run.reach is not None
    ids = set(run.reach.covering)
    if run.green_suite:
        ids |= {t for t, o in run.known.outcomes.items() if o != "passed"}
    files = [f for f in sorted({t.split("::")[0] for t in ids}) if f not in run.changed_paths]
    return replace(selection, files=list(dict.fromkeys([*selection.files, *files])))


def is_target(run: Verification, selection: Selection, test_id: str) -> bool:
    """Whether `test_id` is a test the task is about: by what it executes (`run.reach`), by name,
    as a test the patch adds or edits, or every test when the task asks for a green suite."""
    if run.green_suite:
        return True
    if run.reach is not None:
        return test_id in run.reach.covering or selection.is_task_test(test_id, whole_files=False)
    return selection.is_task_test(test_id)


def _is_target(run: Verification, selection: Selection, failure: TestFailure) -> bool:
    """A failure that is the patch's whatever the starting tree did (see the module docstring);
    the tests the patch left alone in a test file it changed are sorted apart, on the starting tree.
    Without coverage, a failure whose traceback runs through the changed source stands in for
    one that executes it."""
    if is_target(run, selection, failure.test_id):
        return True
    return run.reach is None and _through_changed_source(run, failure)


def _through_changed_source(run: Verification, failure: TestFailure) -> bool:
    """The failure's traceback runs through a source file the patch changed: the patch worked on
    the code this test fails in."""
    text = f"{failure.file}\n{failure.traceback}"
    return any(
        re.search(rf"(?:^|[\s/\"']){re.escape(c.path)}(?:[\":]|\s+line\b)", text, re.M)
        for c in run.src_changes
    )


async def _sort_failures(
    run: Verification,
    session: ExecSession,
    selection: Selection,
    failures: list[TestFailure],
    *,
    reproduce: list[str],
) -> None:
    """Sort new failures on the patched tree into regressions, still failing and pre-existing,
    running on the reproduction tree what the baseline does not know, and the test files in
    `reproduce` (see `agents.roles.verifier.verify`)."""
    run.failing.update({f.test_id: f for f in failures})
    targets = {f.test_id for f in failures if _is_target(run, selection, f)}
    unknown = {
        f.test_id for f in failures if run.starting_outcome(f.test_id) is None and f.test_id not in targets
    }
    # A test the patch left alone in a file it edited: only the starting tree itself says what it did.
    untouched = {tid for tid in unknown if tid.split("::")[0] in selection.changed_test_files}
    unknown -= untouched
    if unrun := sorted(untouched - run.started.keys()):
        await _run_on_starting_tree(run, session, unrun)
    files = sorted(({tid.split("::")[0] for tid in unknown} | set(reproduce)) - run.reproduced_files)
    if files and run.src_changes:
        await _run_reproduction(run, session, files)
    elif files:  # a patch of tests only: the reproduction tree is the patched tree
        run.reproduced_files.update(files)
        run.reproduction.update({f.test_id: f for f in failures if f.test_id.split("::")[0] in files})
    covering = run.reach.covering if run.reach is not None else frozenset()
    elsewhere = crashes_outside(run.starting_crashes, covering) + systemic_crashes(run.starting_crashes)
    crashed_before = _crashes_before(run)
    for failure in sorted(failures, key=lambda f: f.test_id):
        tid = failure.test_id
        known = run.starting_outcome(tid)
        if tid in untouched:
            known = run.started.get(tid)
        if tid in targets or (tid in untouched and known is not None):
            if known == "passed":
                run.regressions.append(tid)
                run.failures.append(
                    _test_failure(FailureClass.TEST_REGRESSION, failure, " (passed before the patch)")
                )
            elif why := environmental(
                failure, crashed_before, elsewhere, through_changed=_through_changed_source(run, failure)
            ):
                # Known to have failed there by its crash, even in a test file the patch edits.
                run.preexisting.append(tid)
                run.environmental[tid] = why
            elif tid not in targets and unchanged(failure, run.starting_crashes):
                # A test the patch left alone in a file it edited, executing none of the changed
                # code, failing exactly as before: the edit did not touch what breaks it.
                run.preexisting.append(tid)
            else:
                run.still_failing.append(tid)
                run.failures.append(_test_failure(FailureClass.TEST_STILL_FAILING, failure))
            continue
        if known is None and tid.split("::")[0] in run.reproduced_files and run.reproduction_resolved:
            known = "failed" if tid in run.reproduction else "passed"
        if known in ("failed", "error"):
            run.preexisting.append(tid)
        else:
            note = "" if known == "passed" else " (its outcome before the patch could not be checked)"
            run.regressions.append(tid)
            run.failures.append(_test_failure(FailureClass.TEST_REGRESSION, failure, note))
    _note_environmental(run, [f.test_id for f in failures])


def _crashes_before(run: Verification) -> dict[str, Crash]:
    """Where each test failed before the patch: on the starting tree, or, for a test the patch
    adds, on the reproduction tree (its tests without its source changes) — when that tree differs
    from the patched one, i.e. the patch changes source too."""
    if not run.src_changes:
        return run.starting_crashes
    added = {
        tid: crash
        for tid, failure in run.reproduction.items()
        if tid not in run.starting_crashes
        and run.starting_outcome(tid) is None
        and (crash := crash_of(failure)) is not None
    }
    return run.starting_crashes | added


def _note_environmental(run: Verification, test_ids: list[str]) -> None:
    """One check saying which targets were not blamed as the environment's failures, and why."""
    ids = sorted(t for t in test_ids if t in run.environmental)
    if not ids:
        return
    reasons = sorted(set(run.environmental[t] for t in ids))
    others = "" if len(reasons) == 1 else f" (and {len(reasons) - 1} other crash(es))"
    summary = (
        f"the environment's, not blamed: {reasons[0]}{others} fails {len(ids)} test(s) that execute the "
        f"changed code, before and after the patch: {_few(ids)}"
    )
    run.add_check(Check(name="environment_failures", ok=True, summary=summary))


@asynccontextmanager
async def _taken_back(run: Verification, changes: list[FileChange]) -> AsyncIterator[None]:
    """The workspace without `changes` inside the block, with them again after it."""
    await restore(run.workspace, changes)
    try:
        yield
    finally:
        await apply_patch(run.workspace, join_sections(changes))


async def _run_without(
    run: Verification, session: ExecSession, changes: list[FileChange], selectors: list[str]
) -> tuple[TestRun, bool]:
    """Run `selectors` with `changes` taken back, then put them back; the run, and whether its
    report is complete (no timeout, nothing truncated, a report read)."""
    async with _taken_back(run, changes):
        result = await session.run_tests(selectors, timeout_s=run.timeout_s())
    return result, not (result.timed_out or result.truncated or not result.report_found)


async def _run_reproduction(run: Verification, session: ExecSession, files: list[str]) -> None:
    """Run `files` with the patch's source changes taken back, then put them back."""
    result, resolved = await _run_without(run, session, run.src_changes, files)
    before = {f.test_id: f for f in result.failures}
    run.reproduced_files.update(files)
    run.reproduction.update(before)
    run.reproduction_resolved = run.reproduction_resolved and resolved
    summary = f"{len(files)} file(s) without the patch's source changes: {_counts(result)}"
    run.add_check(Check(name="baseline", ok=resolved, summary=summary))
    if resolved:
        _remember(run, files, before)


async def _run_on_starting_tree(run: Verification, session: ExecSession, test_ids: list[str]) -> None:
    """Run `test_ids` with the whole patch taken back, then put it back; what they did there is
    their starting outcome (unknown, and so not kept, when the run gave no complete report)."""
    result, resolved = await _run_without(run, session, run.changes, test_ids)
    failed = {f.test_id: f for f in result.failures}
    for tid in test_ids:
        if tid in failed:
            run.started[tid] = "error" if failed[tid].outcome == "error" else "failed"
        elif resolved:
            run.started[tid] = "passed"
    summary = f"{len(test_ids)} test(s) the patch left alone in files it edited, on the starting tree: {_counts(result)}"
    run.add_check(Check(name="baseline", ok=resolved, summary=summary))


def _clear_test_checks(run: Verification) -> None:
    """A test run whose only failures were there before the patch is a good run for the patch."""
    for i, check in enumerate(run.checks):
        if check.name in ("targeted_tests", "full_suite") and not check.ok and "failed" in check.summary:
            note = " (all failing before the patch)"
            run.checks[i] = check.model_copy(update={"ok": True, "summary": check.summary + note})


def _remember(run: Verification, files: list[str], before: dict[str, TestFailure]) -> None:
    """Outcomes on the reproduction tree of test files the patch did not touch are starting outcomes,
    unless the patch changed test code other files share (a conftest.py, a helper under tests/):
    then the reproduction tree differs from the starting tree for every test, and nothing is kept."""
    if any(c.is_test and not is_test_module(c.path, run.test_patterns) for c in run.changes):
        return
    run.known.remember_tests(files, before, changed_paths=run.changed_paths)


async def _evidence(
    run: Verification, session: ExecSession, selection: Selection, example: ExampleCheck | None
) -> None:
    """Find what shows the task's problem gone (see the module docstring): the targets' flips,
    confirmed in the company they pass in; the tests the patch adds; the task's example. Tests that
    execute the change and pass show no regression, never the problem fixed."""
    _collect_evidence(run, selection)
    if _found_wrong(run) or (
        run.tests_run == 0 and run.reach is None
    ):  # no tests at all: `verify.unverifiable` says so
        return
    unknown = [
        f
        for f in selection.target_files
        if f not in run.reproduced_files and f not in run.known.complete_files and f not in run.changed_paths
    ]
    if not run.evidence and unknown and run.src_changes:
        await _run_reproduction(run, session, unknown)
        _collect_evidence(run, selection)
    run.fixed += [t for t in run.reproduction if run.passes_now(t) and t not in run.fixed]
    await _confirm_flips(run, session, selection)
    shown = await _example_evidence(run, session, example) if example is not None else None
    if _found_wrong(run):
        return
    if run.evidence:
        added = [t for t in run.evidence if t.split("::")[0] in selection.changed_test_files]
        run.evidence_kind = "reproduction" if added else "flip"
        why = (
            "the tests the patch adds fail without its fix and pass with it"
            if added
            else "failed before the patch, pass with it"
        )
        run.add_check(Check(name="evidence", ok=True, summary=f"{why}: {_few(added or run.evidence)}"))
        return
    if shown is not None:
        run.evidence.append(shown)
        run.evidence_kind = "example"
        run.add_check(Check(name="evidence", ok=True, summary=shown))
        return
    why = _missing_evidence(run, selection)
    run.add_check(Check(name="evidence", ok=False, summary=why))
    run.failures.append(
        Failure(
            failure_class=FailureClass.TEST_NO_REPRODUCTION,
            path=selection.changed_test_files[0] if selection.changed_test_files else None,
            message=why,
        )
    )


async def _confirm_flips(run: Verification, session: ExecSession, selection: Selection) -> None:
    """A target counts as a flip only if it fails on the starting tree when run as it passed with
    the patch: the whole-suite run on the starting tree (under coverage) may have failed it through
    state other tests left behind, or through the instrumentation itself. The targeted files run
    again without the patch's source changes (the patch's tests stay, as with the patch), in the
    order they ran with it; when the whole suite ran with the patch, the flipped tests' own files.
    A target passing there is order-dependent: listed, not evidence. Tests the patch adds were
    already compared on that tree."""
    changed = set(selection.changed_test_files)
    unconfirmed = [t for t in run.evidence if t.split("::")[0] not in changed and t not in run.reproduction]
    if not unconfirmed:
        return
    flipped = list(dict.fromkeys(t.split("::")[0] for t in unconfirmed))
    targeted = [f for f in selection.files if f in run.ran_files]
    if run.suite_ran or not targeted:
        ordered = [f for f in targeted if f in flipped] + [f for f in flipped if f not in targeted]
    else:
        ordered = targeted
    result, resolved = await _run_without(run, session, run.src_changes, ordered)
    failing = {f.test_id for f in result.failures}
    if not resolved:
        run.add_check(
            Check(
                name="confirm_flips",
                ok=False,
                summary="the starting tree's rerun gave no complete report: flips kept unconfirmed",
            )
        )
        run.evidence = [t for t in run.evidence if t not in unconfirmed]
        return
    order_dependent = [t for t in unconfirmed if t not in failing]
    run.order_dependent += order_dependent
    run.evidence = [t for t in run.evidence if t not in order_dependent]
    run.fixed = [t for t in run.fixed if t not in order_dependent]
    summary = (
        f"{len(unconfirmed) - len(order_dependent)} of {len(unconfirmed)} flip(s) fail on the starting "
        f"tree run as they passed with the patch ({len(ordered)} file(s))"
    )
    if order_dependent:
        summary += f"; order-dependent (pass there when run this way, not evidence): {_few(order_dependent)}"
    run.add_check(Check(name="confirm_flips", ok=True, summary=summary))


async def _example_evidence(run: Verification, session: ExecSession, check: ExampleCheck) -> str | None:
    """Run the task's example on the starting tree (or take it from the cache) and with the patch,
    compare (`agents.roles.verifier.example`); a line of evidence when it shows the problem gone,
    a finding when it still fails or breaks; its behaviour with the patch recorded either way."""
    text = check.example.text
    timeout_s = min(EXAMPLE_TIMEOUT_S, max(1.0, run.timeout_s() / 4))
    before = check.cache.load(check.tree, text) if check.cache is not None else None
    if before is None:
        async with _taken_back(run, run.changes):
            before = await session.run_example(text, timeout_s=timeout_s)
        if check.cache is not None and not before.timed_out:
            check.cache.store(check.tree, text, before)
    after = await session.run_example(text, timeout_s=timeout_s)
    run.example_behaviour = behaviour_of(after)
    run.example_before = behaviour_of(before)
    outcome = compare(before, after)
    run.add_check(Check(name="example", ok=outcome.outcome in ("fixed", "nothing"), summary=outcome.line))
    if outcome.outcome == "fixed":
        return outcome.line
    if outcome.outcome in ("still_failing", "broken"):
        cls = (
            FailureClass.EXAMPLE_STILL_FAILING
            if outcome.outcome == "still_failing"
            else FailureClass.EXAMPLE_REGRESSION
        )
        run.failures.append(Failure(failure_class=cls, message=outcome.line))
    return None


def _found_wrong(run: Verification) -> bool:
    return any(f.severity == "error" for f in run.failures)


def _collect_evidence(run: Verification, selection: Selection) -> None:
    """Targets that failed before the patch (on the starting tree, or on the reproduction tree for
    the tests the patch adds or edits) and pass with it."""
    changed = set(selection.changed_test_files)
    before = {t: "failed" for t in run.reproduction if t.split("::")[0] in changed}
    if run.reproduction_resolved:
        before |= {t: "failed" for t in run.reproduction}
    before |= {t: o for t, o in run.known.outcomes.items() if o != "passed"}
    before |= {t: o for t, o in run.started.items() if o != "passed"}
    for tid in sorted(before):
        # When every test may be affected, a test that went from failing to passing did so
        # because of the patch, whatever it executes.
        counts = run.run_all or is_target(run, selection, tid) or tid.split("::")[0] in changed
        if run.passes_now(tid) and counts:
            if tid not in run.evidence:
                run.evidence.append(tid)
            if tid not in run.fixed:
                run.fixed.append(tid)


def _few(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def _missing_evidence(run: Verification, selection: Selection) -> str:
    if run.environmental:
        ids = sorted(run.environmental)
        return (
            f"{len(ids)} test(s) that execute the changed code fail here before and after the patch from "
            f"the environment ({run.environmental[ids[0]]}), and no test went from failing to passing: "
            f"nothing shows the change works ({_few(ids)})"
        )
    order = f"; order-dependent, not evidence: {_few(run.order_dependent)}" if run.order_dependent else ""
    if run.reach is not None and not run.reach.covering:
        return (
            f"no test executes the code the patch changes ({_few(sorted({c.path for c in run.src_changes}))}), "
            f"and no test went from failing to passing: nothing checked the change; add a test that calls it{order}"
        )
    if run.reach is not None and (executing := sorted(t for t in run.reach.covering if run.passes_now(t))):
        return (
            f"no regression found: {len(executing)} test(s) that execute the changed code pass with it "
            f"({_few(executing)}); nothing showed the problem fixed: no test the task is about failed "
            f"before the patch; add a test that fails without the fix{order}"
        )
    if selection.changed_test_files and run.src_changes:
        return (
            "the tests the patch adds or changes pass without its source changes too, and no test the "
            f"task is about went from failing to passing: nothing shows the problem is gone{order}"
        )
    if selection.changed_test_files:
        return "the patch changes only tests, and no test the task is about went from failing to passing"
    targets = ", ".join(selection.target_files[:3])
    named = f" ({targets} passed before the patch too)" if targets else ""
    return (
        f"no test the task is about failed before the patch{named}, and the patch adds none that fails "
        f"without its fix: add a test that reproduces the problem{order}"
    )
