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
- B itself, for one kind of test only: one the patch left alone in a test file it edited that
  fails on P. R keeps the patch's version of that file, which may differ for it (a fixture of the
  file changed), so its starting outcome comes from running it with the whole patch taken back.

The suite runs once on B, under coverage of the files the patch changes (`measure`): that run
gives every test's starting outcome and which tests execute the changed lines, so on P only those
tests' files (with the named and edited ones) need to run — a test that executes none of the
changed code cannot change outcome. A clean patch costs one static call, the coverage run on B
(once per starting tree: kept in the cache) and a targeted run on P. Without coverage, the
earlier design: the targeted run, then the whole suite on P, and only failures re-run on R or B
(passing tests need no comparison).
"""

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import anyio

from agents.failures import FailureClass, blame
from agents.feedback import order_failures
from agents.messages.verification import (
    MAX_BEHAVIOUR,
    MAX_COVERING,
    MAX_FAILURES,
    Baseline,
    Check,
    Failure,
    VerificationReport,
)
from agents.roles.verifier.answer import check_answer
from agents.roles.verifier.baseline import Knowledge
from agents.roles.verifier.changed_code import probes_of
from agents.roles.verifier.diff_review import ReviewLimits, review_patch
from agents.roles.verifier.environment_failures import crash_of
from agents.roles.verifier.errors import WorkspaceError
from agents.roles.verifier.example import ExampleCache, TaskExample
from agents.roles.verifier.exec_session import EXEC_SCOPES, ExecSession, ExecUnavailable, open_exec_session
from agents.roles.verifier.execution import CoverageCache
from agents.roles.verifier.measure import Measurement
from agents.roles.verifier.patchset import FileChange, MalformedPatch, parse_patch
from agents.roles.verifier.rewritten_tests import forgive_rewrites
from agents.roles.verifier.scope import MeasuredScope, changed_sources, measured_scope
from agents.roles.verifier.selection import (
    Selection,
    asks_for_green_suite,
    importing_tests,
    select_tests,
    test_files,
)
from agents.roles.verifier.state import DEADLINE_MARGIN_S, Verification, seconds_left
from agents.roles.verifier.static import check_static
from agents.roles.verifier.test_modules import is_test_module, python_files
from agents.roles.verifier.testing import ExampleCheck, deadline_failure, run_tests
from agents.roles.verifier.tree import (
    apply_patch,
    changed_tracked_files,
    check_patch,
    head_commit,
    reset_tracked,
    restore,
    tree_hash,
)
from agents.roles.verifier.verdict import decide
from agents.runtime.tools import ToolProvider


def _report(run: Verification, *, started: float, judged: bool | None = None) -> VerificationReport:
    failures = order_failures(run.failures)[:MAX_FAILURES]
    # With the starting tree measured, every test's outcome is known, run again or not.
    verdict = decide(
        failures, judged=(run.tests_run > 0 or run.reach is not None) if judged is None else judged
    )
    if verdict == "unverified" and not any(f.severity == "error" for f in failures):
        failures.append(
            Failure(
                failure_class=FailureClass.VERIFY_UNVERIFIABLE,
                message="no tests ran: nothing could check the patch",
            )
        )
    errors = [f for f in failures if f.severity == "error"]
    if verdict == "unverified" and errors:
        # What was missing, first: the one line a person reads.
        unverifying = [f for f in errors if blame(f.failure_class) != "model"] or errors
        reason = f"{unverifying[0].message} ({unverifying[0].failure_class})"
    elif errors:
        reason = f"{len(errors)} failure(s), first {errors[0].failure_class}: {errors[0].message}"
    elif verdict == "passed" and run.evidence:
        reason = f"shown fixed by {_EVIDENCE_WORDS.get(run.evidence_kind, run.evidence_kind)}: {', '.join(run.evidence[:3])}; no regression in {run.tests_run} test outcome(s)"
    else:
        reason = ""
    summary = f"{verdict}: {reason or f'{run.tests_run} test outcome(s), nothing wrong found'}"
    return VerificationReport(
        verdict=verdict,
        checks=run.checks,
        failures=failures,
        fixed=sorted(run.fixed),
        regressions=run.regressions,
        still_failing=run.still_failing,
        preexisting=run.preexisting,
        evidence=run.evidence,
        covering=sorted(run.reach.covering)[:MAX_COVERING] if run.reach is not None else [],
        environment=run.environment.model_dump() if run.environment is not None else None,  # pyright: ignore[reportArgumentType] - pydantic validates the dict into EnvironmentUse
        files_changed=[c.path for c in run.changes],
        tests_run=run.tests_run,
        duration_s=round(time.monotonic() - started, 3),
        summary=summary,
        evidence_kind=run.evidence_kind if verdict == "passed" else "none",  # pyright: ignore[reportArgumentType] - one of EvidenceKind, set by testing._evidence
        order_dependent=run.order_dependent,
        behaviour=(behaviour := _behaviour(run)),
        starting_behaviour=_starting_behaviour(run, behaviour),
    )


_EVIDENCE_WORDS = {
    "flip": "a target test's flip (failed before the patch, passes with it, confirmed in the same company)",
    "reproduction": "the test the patch adds (fails without its fix, passes with it)",
    "example": "the task's example",
}


def _behaviour(run: Verification) -> dict[str, str]:
    """What the patched tree observably did: the task's example, and per test the task is about
    that ran with the patch, its outcome (a failure by its crash, numbers aside)."""
    seen: dict[str, str] = {}
    if run.example_behaviour is not None:
        seen["example"] = run.example_behaviour
    tests = sorted(run.reach.covering) if run.reach is not None else []
    tests += [t for t in run.evidence + run.still_failing + run.regressions if "::" in t]
    for tid in dict.fromkeys(tests):
        if len(seen) >= MAX_BEHAVIOUR:
            break
        if tid in run.failing:
            crash = crash_of(run.failing[tid])
            seen[tid] = "failed: " + (
                " ".join(crash.message.split())[:120] if crash else run.failing[tid].message[:120]
            )
        elif run.passes_now(tid):
            seen[tid] = "passed"
    return seen


def _starting_behaviour(run: Verification, behaviour: dict[str, str]) -> dict[str, str]:
    """The starting tree's side of `behaviour`, where known: the example's outcome there, and
    `passed` for the tests that passed there."""
    seen: dict[str, str] = {}
    if run.example_before is not None and "example" in behaviour:
        seen["example"] = run.example_before
    for tid in behaviour:
        if tid != "example" and run.starting_outcome(tid) == "passed":
            seen[tid] = "passed"
    return seen


def _approved_note(changes: list[FileChange], approved: Sequence[str]) -> str:
    """`; approved by a person: PATH, ...` for the changed protected paths a person approved."""
    shown = sorted({c.path for c in changes} & set(approved))
    return f"; approved by a person: {', '.join(shown)}" if shown else ""


def _starting_sources(workspace: Path, changes: list[FileChange]) -> dict[str, str]:
    """The starting text of each changed Python file, by its old path (the workspace at HEAD)."""
    texts = {}
    for change in changes:
        if change.old_path and change.old_path.endswith(".py") and not change.binary:
            try:
                texts[change.old_path] = (workspace / change.old_path).read_text(
                    encoding="utf-8", errors="replace"
                )
            except OSError:
                pass
    return texts


def _patched_sources(workspace: Path, changes: list[FileChange]) -> dict[str, str]:
    texts = {}
    for change in changes:
        if change.kind != "deleted" and change.path.endswith(".py") and not change.binary:
            try:
                texts[change.path] = (workspace / change.path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                pass
    return texts


def _starting_test_texts(
    workspace: Path, changes: list[FileChange], patterns: Sequence[str]
) -> dict[str, str]:
    """The starting text of each changed test module (the workspace is still at HEAD), by its
    path after the patch: what tells the tests the patch edits from the ones it left alone."""
    texts = {}
    for change in changes:
        if change.old_path and change.kind != "deleted" and is_test_module(change.path, patterns):
            try:
                texts[change.path] = (workspace / change.old_path).read_text(
                    encoding="utf-8", errors="replace"
                )
            except OSError:
                pass
    return texts


@dataclass(frozen=True)
class PatchTask:
    """What the task says about the patch judged for it."""

    mode: str
    """The task's mode: any change in read mode is out of scope."""
    plan_files: Sequence[str] = ()
    """The plan's files of interest: a change far from them is a scope warning."""
    test_targets: Sequence[str] = ()
    """pytest node ids or files that should show the task done."""
    text: str = ""
    """The task's words: the tests they name are targets too (`agents.roles.verifier.selection`)."""
    example: TaskExample | None = None
    """The task's example code: run on the starting tree and with the patch, and compared
    (`agents.roles.verifier.example`). None: in execute mode, the code `text` shows."""
    approved_paths: Sequence[str] = ()
    """Protected paths a person approved changing: judged on their merits, not failed as protected."""
    candidates_change: Sequence[str] = ()
    """Source files other candidates for the task change: the starting tree's coverage run measures
    them too, so one run of the suite serves every candidate."""


async def verify_patch(
    *,
    workspace: Path,
    patch: str,
    task: PatchTask,
    tools: ToolProvider,
    deadline: datetime,
    baseline: Baseline | None,
    session: ExecSession | None = None,
    limits: ReviewLimits = ReviewLimits(),
    full_suite: bool = True,
    cache_dir: Path | None = None,
) -> tuple[VerificationReport, Baseline]:
    """Judge `patch` against the starting tree in `workspace` for `task`; see the package docstring.
    `session`: an exec session already open on `workspace` (a spare's, see `spares`); else one is
    opened through `tools` for this verification. The tests the task is about are found by what
    they execute (`execution`), measured once per starting tree. `cache_dir`: where the
    starting trees' coverage is kept between verifications (None: measured every time).

    Raises:
        WorkspaceError: the workspace is not a git repository with a commit, or git failed.
    """
    started = time.monotonic()
    commit = await head_commit(workspace)
    run = Verification(
        workspace=workspace,
        deadline=deadline,
        known=Knowledge.of(baseline, commit),
        test_patterns=python_files(workspace),
    )

    def early(
        cls: FailureClass, message: str, path: str | None = None
    ) -> tuple[VerificationReport, Baseline]:
        run.failures.append(Failure(failure_class=cls, path=path, message=message))
        run.add_check(Check(name="patch", ok=False, summary=message))
        return _report(run, started=started, judged=True), run.known.to_baseline()

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
    run.failures += review_patch(
        run.changes,
        plan_files=list(task.plan_files),
        mode=task.mode,
        limits=limits,
        approved=frozenset(task.approved_paths),
    )
    review_errors = [f for f in run.failures if f.severity == "error"]
    run.add_check(
        Check(
            name="diff_review",
            ok=not review_errors,
            summary=f"{len(run.changes)} file(s): {len(review_errors)} problem(s), {len(run.failures) - len(review_errors)} warning(s)"
            + _approved_note(run.changes, task.approved_paths),
        )
    )
    if any(
        f.failure_class == FailureClass.PATCH_PROTECTED_PATH and f.path and ".git" in Path(f.path).parts
        for f in review_errors
    ):
        return early(FailureClass.PATCH_PROTECTED_PATH, "not applied: the patch writes into .git/")
    if task.mode == "read":  # the review already failed it; running its tests would change nothing
        run.add_check(Check(name="patch", ok=False, summary="not applied: read mode allows no changes"))
        return _report(run, started=started, judged=True), run.known.to_baseline()
    why = await check_patch(workspace, patch)
    if why is not None:
        return early(FailureClass.PATCH_APPLY_FAILED, why.splitlines()[-1] if why else "does not apply")
    if seconds_left(deadline) <= DEADLINE_MARGIN_S:
        return early(FailureClass.BUDGET_WALL, "the deadline passed before verification could start")
    before, after, measurement = await _apply_measured(run, patch, cache_dir, task.candidates_change)
    run.green_suite = asks_for_green_suite(task.text)
    run.add_check(
        Check(name="patch", ok=True, summary=f"applies to {commit[:12]}: {len(run.changes)} file(s)")
    )
    try:
        with anyio.move_on_after(seconds_left(deadline)) as scope:
            async with _exec_session(tools, workspace, session) as exec_session:
                if await check_static(run, exec_session):
                    selection = _selection(run, task, before)
                    await run_tests(
                        run,
                        exec_session,
                        selection,
                        full_suite=full_suite,
                        example=_example_check(_example_of(task), measurement.tree, cache_dir),
                        measurement=measurement,
                    )
                    _forgive_rewrites(run, before, after)
                else:
                    run.add_check(
                        Check(name="targeted_tests", ok=False, summary="not run: the patch does not compile")
                    )
        if scope.cancelled_caught:
            run.failures.append(deadline_failure(run))
    except ExecUnavailable as exc:
        run.failures.append(Failure(failure_class=FailureClass.ENV_INFRA, message=str(exc)))
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(60):
            await restore(workspace, run.changes)
            # A test run may have written to tracked files too; the next verification needs HEAD.
            await reset_tracked(workspace)
    return _report(run, started=started), run.known.to_baseline()


def _selection(run: Verification, task: PatchTask, before: dict[str, str]) -> Selection:
    """The tests the task is about by name and by the files the patch changes (`selection`)."""
    return select_tests(
        run.workspace,
        run.changes,
        list(task.test_targets),
        before=before,
        task_text=task.text,
        test_patterns=run.test_patterns,
    )


def _forgive_rewrites(run: Verification, before: dict[str, str], after: dict[str, str]) -> None:
    """The diff review's assertion balance counted again now that the tests ran
    (`rewritten_tests`); its check says so when a finding became a warning."""
    failures = forgive_rewrites(run.failures, run.changes, before, after, set(run.evidence))
    if failures == run.failures:
        return
    run.failures = failures
    errors = sum(1 for f in failures if f.severity == "error" and _of_review(f.failure_class))
    for i, check in enumerate(run.checks):
        if check.name == "diff_review":
            note = " (assertions removed by tests rewritten to check the fix: a warning)"
            run.checks[i] = check.model_copy(update={"ok": errors == 0, "summary": check.summary + note})


def _of_review(cls: FailureClass) -> bool:
    """A finding the diff review makes (the only source of `patch.*` and `test.weakened` here)."""
    return cls == FailureClass.TEST_WEAKENED or cls.value.startswith("patch.")


async def _apply_measured(
    run: Verification, patch: str, cache_dir: Path | None, measure_also: Sequence[str] = ()
) -> tuple[dict[str, str], dict[str, str], Measurement]:
    """Apply `patch` to the starting tree in the workspace, keeping what the verdict compares: the
    starting texts of the changed test files, and the probes (changed lines, old and new) the
    coverage of the starting tree is read for. `measure_also`: other files the starting tree's
    coverage run measures in the same run (other candidates' changed files)."""
    workspace, changes = run.workspace, run.changes
    before = await anyio.to_thread.run_sync(_starting_test_texts, workspace, changes, run.test_patterns)
    texts = await anyio.to_thread.run_sync(_starting_sources, workspace, changes)
    sources = changed_sources(changes)
    also = [p for p in dict.fromkeys(measure_also) if p not in sources and (workspace / p).is_file()]
    scope = await anyio.to_thread.run_sync(_scope_of, workspace, [*sources, *also], run.test_patterns)
    tree = await tree_hash(workspace)
    await apply_patch(workspace, patch)
    patched = await anyio.to_thread.run_sync(_patched_sources, workspace, changes)
    cache = CoverageCache(cache_dir) if cache_dir is not None else None
    probes = probes_of(changes, texts, patched, test_patterns=run.test_patterns)
    return before, patched, Measurement(probes=probes, tree=tree, cache=cache, scope=scope, also=tuple(also))


def _scope_of(workspace: Path, sources: list[str], patterns: Sequence[str]) -> MeasuredScope:
    """What the starting tree's coverage run runs (`scope`), read on the starting tree."""
    every = test_files(workspace, patterns)
    return measured_scope(sources, every, importing_tests(workspace, sources, every))


def _example_of(task: PatchTask) -> TaskExample | None:
    """The task's example: the one given, else in execute mode the code the task's text shows."""
    if task.example is not None:
        return task.example
    return TaskExample(text=task.text) if task.mode == "execute" and task.text.strip() else None


def _example_check(example: TaskExample | None, tree: str, cache_dir: Path | None) -> ExampleCheck | None:
    if example is None:
        return None
    return ExampleCheck(example, tree, ExampleCache(cache_dir) if cache_dir is not None else None)


@asynccontextmanager
async def _exec_session(
    tools: ToolProvider, workspace: Path, session: ExecSession | None
) -> AsyncIterator[ExecSession]:
    if session is not None:
        yield session
        return
    async with open_exec_session(tools.servers(workspace, EXEC_SCOPES)["exec"]) as opened:
        yield opened


async def verify_answer(*, workspace: Path, answer: str) -> VerificationReport:
    """Check a read-mode answer's citations against the tree in `workspace`."""
    return await anyio.to_thread.run_sync(check_answer, workspace, answer)


__all__ = ["WorkspaceError", "verify_answer", "verify_patch"]
