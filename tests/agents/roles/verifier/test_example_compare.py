"""What the task's example, run on the starting tree and with the patch, shows about the patch."""

from agents.roles.verifier.example import behaviour_of, compare
from agents.roles.verifier.exec_session import ExampleRun, StatementRun

IMPORT = StatementRun(source="from frac import ratio")


def _run(*statements: StatementRun, shown: tuple[str, ...] = ("ZeroDivisionError",), timed_out: bool = False):
    return ExampleRun(
        ran=True, statements=[IMPORT, *statements], shown_exceptions=list(shown), timed_out=timed_out
    )


def _raises(source: str, raised: str, *, in_repository: bool = True) -> StatementRun:
    return StatementRun(source=source, raised=raised, in_repository=in_repository)


def _prints(source: str, output: str, shown: str | None = None) -> StatementRun:
    return StatementRun(source=source, output=output, shown_output=shown)


CRASH = _raises("ratio(0, 0)", "ZeroDivisionError: division by zero")


def test_the_issues_exception_gone_is_fixed() -> None:
    outcome = compare(_run(CRASH), _run(_prints("ratio(0, 0)", "0\n")))
    assert outcome.outcome == "fixed"
    assert "ratio(0, 0)" in outcome.line and "ZeroDivisionError" in outcome.line


def test_the_same_exception_still_raised_is_still_failing() -> None:
    outcome = compare(_run(CRASH), _run(CRASH))
    assert outcome.outcome == "still_failing"
    assert "still raises ZeroDivisionError" in outcome.line


def test_a_statement_that_ran_clean_and_now_raises_in_the_project_is_broken() -> None:
    before = _run(CRASH, _prints("ratio(4, 2)", "2.0\n"))
    after = _run(_prints("ratio(0, 0)", "0\n"), _raises("ratio(4, 2)", "TypeError: bad operand"))
    assert compare(before, after).outcome == "broken"


def test_the_wrong_output_a_session_shows_then_another_output_is_fixed() -> None:
    """The issue shows `ratio(1, 3)` printing `0` (the bug): reproduced when it prints that on the
    starting tree, fixed when it prints something else without raising."""
    wrong = _prints("ratio(1, 3)", "0\n", shown="0")
    assert (
        compare(_run(wrong, shown=()), _run(_prints("ratio(1, 3)", "0.333\n", shown="0"), shown=())).outcome
        == "fixed"
    )
    assert compare(_run(wrong, shown=()), _run(wrong, shown=())).outcome == "still_failing"


def test_what_the_starting_tree_did_not_reproduce_shows_nothing() -> None:
    """An exception the issue does not show, one raised outside the project, an import error (the
    environment's) and a run that did not happen are not the issue's failure."""
    other = _raises("ratio(0, 0)", "KeyError: 'x'")
    outside = _raises("ratio(0, 0)", "ZeroDivisionError: division by zero", in_repository=False)
    missing = StatementRun(
        source="ratio(0, 0)", raised="ModuleNotFoundError: numpy", in_repository=True, import_error=True
    )
    fixed = _run(_prints("ratio(0, 0)", "0\n"))
    for before in (_run(other), _run(outside), _run(missing), ExampleRun(ran=False, note="no code")):
        assert compare(before, fixed).outcome == "nothing"


def test_another_exception_instead_of_the_issues_is_not_evidence() -> None:
    outcome = compare(_run(CRASH), _run(_raises("ratio(0, 0)", "ZeroDivisionError: cannot divide 0 by 0")))
    assert outcome.outcome == "nothing"


def test_behaviour_compares_outputs_not_addresses() -> None:
    one = _run(_prints("obj", "<frac.Ratio object at 0x7f00aa>\n"))
    two = _run(_prints("obj", "<frac.Ratio object at 0x7f11bb>\n"))
    assert behaviour_of(one) == behaviour_of(two)
    assert behaviour_of(one) != behaviour_of(_run(CRASH))
    assert behaviour_of(ExampleRun(ran=False)) is None


def test_the_issues_exception_wrapped_in_the_projects_own_is_reproduced() -> None:
    """The issue shows a TypeError; the project raises its own error from it (`raise
    PlotSpecError(...) from err`): the issue's problem all the same; an unrelated error is not."""
    wrapped = StatementRun(
        source="plot(flags)",
        raised="PlotSpecError: Scale setup failed for the `color` variable",
        in_repository=True,
        causes=["TypeError"],
    )
    fixed = _prints("plot(flags)", "<Plot>\n")
    assert compare(_run(wrapped, shown=("TypeError",)), _run(fixed, shown=("TypeError",))).outcome == "fixed"
    other = wrapped.model_copy(update={"causes": ["KeyError"]})
    assert compare(_run(other, shown=("TypeError",)), _run(fixed, shown=("TypeError",))).outcome == "nothing"


def test_an_expression_printing_what_the_task_shows_only_with_the_patch_is_fixed() -> None:
    """ "I expect `>>> ratio(0, 0)` to give `0`": the starting tree prints something else, the patch
    prints the shown output — fixed; a patch printing yet another value shows nothing."""
    before = _run(_prints("ratio(0, 0)", "nan\n", shown="0"), shown=())
    right = _run(_prints("ratio(0, 0)", "0\n", shown="0"), shown=())
    other = _run(_prints("ratio(0, 0)", "-1\n", shown="0"), shown=())
    outcome = compare(before, right)
    assert outcome.outcome == "fixed" and "prints what the task shows" in outcome.line
    assert compare(before, other).outcome == "nothing"
