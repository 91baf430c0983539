"""The coverage run on the starting tree: every test's starting outcome, and who executes what.

One run of the suite with the whole patch taken back, measuring only the starting files the patch
changes (`agents.roles.verifier.execution` says what is concluded from it, and why that is
cheap). It is kept per starting tree (`CoverageCache`): a revision that changes the same files
runs nothing here; one that changes others measures only those.
"""

from dataclasses import dataclass

from agents.messages.verification import Check
from agents.roles.verifier.changed_code import Probes
from agents.roles.verifier.exec_session import ExecSession, TestFailure
from agents.roles.verifier.execution import CoverageCache, Reach, StartingRun, reach
from agents.roles.verifier.patchset import join_sections
from agents.roles.verifier.scope import MeasuredScope
from agents.roles.verifier.state import Verification
from agents.roles.verifier.tree import apply_patch, restore

SUITE_ESTIMATE_FACTOR = 1.2
"""The coverage run is skipped when the time left is below this multiple of the suite's duration."""


@dataclass(frozen=True)
class Measurement:
    """What finding the tests that execute the changed code needs."""

    probes: Probes
    tree: str
    """The starting tree's git tree hash (with the scope, the cache key)."""
    cache: CoverageCache | None = None
    scope: MeasuredScope = MeasuredScope(files=None, suite_files=0)
    """The tests the coverage run runs: the whole suite, or the changed packages' in a large one."""
    also: tuple[str, ...] = ()
    """Files measured in the same run for other candidates (their changed files)."""


async def measure_starting_tree(
    run: Verification, session: ExecSession, measurement: Measurement
) -> Reach | None:
    """The tests that execute the patch's changed code (see the module docstring), every test's
    starting outcome put into `run.known`; None when nothing could be measured (coverage missing
    in the test interpreter, a run cut short), the check saying why."""
    paths = measurement.probes.paths
    if not paths:
        return None
    scope = measurement.scope
    if scope.files is not None and not scope.files:
        why = f"no test module in the changed packages, and the suite ({scope.suite_files} test modules) is too large to run whole"
        run.add_check(Check(name="coverage", ok=False, summary=f"not measured on the starting tree: {why}"))
        return None
    key = scope.cache_key(measurement.tree)
    cache = measurement.cache
    cached = cache.load(key) if cache is not None else None
    need = paths if cached is None else cached.missing(paths)
    starting = cached
    if cached is None or need:
        duration = run.known.suite_duration_s
        if duration is not None and run.timeout_s() < duration * SUITE_ESTIMATE_FACTOR:
            why = f"{run.timeout_s():.0f} s left, the suite takes {duration:.0f} s"
            run.add_check(
                Check(name="coverage", ok=False, summary=f"not measured on the starting tree: {why}")
            )
            return None
        also = list(measurement.also) if cached is None else cached.missing(list(measurement.also))
        need = list(dict.fromkeys([*need, *also]))
        measured = await _measure(run, session, need, scope)
        if measured is None:
            return None
        starting = measured if cached is None else cached.merged(measured, need)
        if cache is not None:
            cache.store(key, starting)
    else:
        run.add_check(
            Check(
                name="coverage",
                ok=True,
                summary=f"the starting tree's coverage of {len(paths)} file(s) was known{'' if scope.whole else f' ({scope.describe()})'}: {len(cached.outcomes)} tests",
            )
        )
    assert starting is not None
    if not starting.outcomes:  # a suite with no tests: nothing to measure (`verify.unverifiable`)
        return None
    _remember(run, starting)
    found = reach(starting, measurement.probes)
    return found


async def _measure(
    run: Verification, session: ExecSession, paths: list[str], scope: MeasuredScope
) -> StartingRun | None:
    await restore(run.workspace, run.changes)
    try:
        result = await session.run_tests(
            list(scope.files or ()), timeout_s=run.timeout_s(), coverage_files=paths
        )
    finally:
        await apply_patch(run.workspace, join_sections(run.changes))
    run.environment = result.environment or run.environment
    coverage = result.coverage
    why = (
        "the run timed out"
        if result.timed_out
        else (f"pytest was {result.killed}" if result.killed else "")
        or (result.setup_error.message if result.setup_error else "")
        or (coverage.error if coverage is not None and coverage.error else "")
        or ("no report" if not result.report_found or coverage is None else "")
    )
    if why or coverage is None:
        run.add_check(Check(name="coverage", ok=False, summary=f"not measured on the starting tree: {why}"))
        if result.timed_out and run.known.suite_duration_s is None:
            # The suite takes at least this long before the patch: a later run the deadline
            # stops sooner is the deadline's, not the patch's (`testing.timeout_failure`).
            run.known.suite_duration_s = result.duration_s
        return None
    run.add_check(
        Check(
            name="coverage",
            ok=True,
            summary=(
                f"{scope.describe()} on the starting tree, measuring {len(paths)} file(s): "
                f"{result.passed} passed, {result.failed} failed, {result.errors} errors, "
                f"{result.skipped} skipped in {result.duration_s:.1f} s"
            ),
        )
    )
    return StartingRun(
        outcomes=coverage.outcomes,
        crashes=coverage.crashes,
        measured={p: coverage.files.get(p, {}) for p in paths},
        duration_s=result.duration_s,
        complete=not result.truncated or len(coverage.outcomes) >= result.total,
    )


def _remember(run: Verification, starting: StartingRun) -> None:
    """Every test's starting outcome into the verification's knowledge of the starting tree."""
    files = sorted({tid.split("::")[0] for tid in starting.outcomes})
    failing = {
        tid: TestFailure(test_id=tid, outcome="error" if outcome == "error" else "failed")
        for tid, outcome in starting.outcomes.items()
        if outcome in ("failed", "error")
    }
    run.known.remember_tests(files, failing, changed_paths=run.changed_paths)
    run.starting_crashes = dict(starting.crashes)
    if run.known.suite_duration_s is None:
        run.known.suite_duration_s = starting.duration_s
