"""Assertions removed from tests the patch rewrote to check the new behaviour.

The diff review refuses a test file that loses assertions on balance (`diff_review`): a coder
deleting the checks a fix breaks is what it is there to stop. A task that changes behaviour on
purpose ("raise an error for dotted names") makes some old checks wrong, though, and its fix
rewrites those tests, often shorter ("`pytest.raises(ValueError)`" where six lines checked the
old behaviour). Which of the two a patch did, the test runs show: a test rewritten to check the
new behaviour fails without the patch's source changes and passes with them (it is evidence); a
weakened test passes either way, since nothing it still checks depends on the fix.

So the balance is counted again per test once the tests have run: a test that lost assertions
(or was removed, a test written in its place) and is evidence is a rewrite, not a weakening. When
every test that lost assertions is, the finding becomes a warning naming them; else it stays an
error.
"""

from agents.failures import FailureClass
from agents.messages.verification import Failure
from agents.roles.verifier.diff_review import ASSERTION, BALANCE_MARK, written_in_place
from agents.roles.verifier.patchset import FileChange
from agents.roles.verifier.selection import definition_spans, matches


def is_assertion_balance(failure: Failure) -> bool:
    """The diff review's finding of a test file that loses assertions on balance."""
    return failure.failure_class == FailureClass.TEST_WEAKENED and BALANCE_MARK in failure.message


def tests_in(text: str) -> dict[str, tuple[int, int]]:
    """Each test of a test module (`test_x`, `TestCase::test_x`) -> its first line (decorators
    included) and last line."""
    spans = definition_spans(text) or {}
    return {name: span for name, span in spans.items() if name.rsplit("::", 1)[-1].startswith("test")}


def _assertions(lines: list[str], span: tuple[int, int]) -> int:
    return sum(1 for line in lines[span[0] - 1 : span[1]] if ASSERTION.match(line))


def _outside(lines: list[str], tests: dict[str, tuple[int, int]]) -> int:
    inside = {n for first, last in tests.values() for n in range(first, last + 1)}
    return sum(1 for n, line in enumerate(lines, 1) if n not in inside and ASSERTION.match(line))


def losing_tests(change: FileChange, old: str, new: str) -> dict[str, str | None]:
    """Tests of the old file holding fewer assertion lines in the new one -> the test standing
    for them now: the same test, the test written where a removed one stood, or None (removed,
    nothing in its place). Assertions lost outside any test (a helper's) are the entry ""."""
    old_tests, new_tests = tests_in(old), tests_in(new)
    old_lines, new_lines = old.splitlines(), new.splitlines()
    removed = {line for line, _ in change.removed}
    # The tests the patch adds, by the new file's line of their `def`.
    added = {line for line, _ in change.added}
    new_defs = {
        first: name for name, (first, _) in new_tests.items() if name not in old_tests and first in added
    }
    losing: dict[str, str | None] = {}
    if _outside(new_lines, new_tests) < _outside(old_lines, old_tests):
        # Checks lost outside any test (a shared helper's) are no test's rewrite.
        return {"": None}
    for name, span in old_tests.items():
        had = _assertions(old_lines, span)
        if name in new_tests:
            if _assertions(new_lines, new_tests[name]) < had:
                losing[name] = name
        elif had:
            losing[name] = written_in_place(span[0], change.anchors, new_defs, removed)
    return losing


def _is_evidence(test: str, path: str, fixed: set[str]) -> bool:
    return any(matches(t, f"{path}::{test}") for t in fixed)


def forgive_rewrites(
    failures: list[Failure],
    changes: list[FileChange],
    before: dict[str, str],
    after: dict[str, str],
    fixed: set[str],
) -> list[Failure]:
    """`failures` with each assertion-balance error made a warning when every test of its file
    that lost assertions was rewritten to check the fix (see the module docstring). `before` and
    `after`: the changed test files' texts on the starting and the patched tree, by path after the
    patch; `fixed`: the tests that failed without the patch's source changes and pass with them
    (the evidence)."""
    by_path = {c.path: c for c in changes}
    out = []
    for failure in failures:
        change = by_path.get(failure.path or "")
        old, new = before.get(failure.path or ""), after.get(failure.path or "")
        if (
            failure.severity != "error"
            or not is_assertion_balance(failure)
            or change is None
            or old is None
            or new is None
        ):
            out.append(failure)
            continue
        losing = losing_tests(change, old, new)
        if losing and all(n is not None and _is_evidence(n, change.path, fixed) for n in losing.values()):
            rewrites = ", ".join(sorted({n for n in losing.values() if n is not None}))
            note = (
                "; every test that lost them was rewritten to check the fix (fails without it, "
                f"passes with it): {rewrites}"
            )
            failure = failure.model_copy(update={"severity": "warning", "message": failure.message + note})
        out.append(failure)
    return out
