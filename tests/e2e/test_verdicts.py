"""Whole tasks whose ending rests on the verifier's evidence and on the cost budget: a patch that
leaves the task's failing test failing goes back to the coder, and a spend limit binds."""

from pathlib import Path

import anyio
import pytest

from agents.messages import Budgets, ModelNames, TaskSubmitted
from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SCRIPTED = Path(__file__).with_name("scripted_mean.py")
OPS = '"""Summaries."""\n\n\ndef mean(xs):\n    return sum(xs) / (len(xs) - 1)\n\n\ndef top(xs):\n    return max(xs)\n'
FILES = {
    "stats/__init__.py": "",
    "stats/ops.py": OPS,
    "tests/test_ops.py": "from stats.ops import mean, top\n\n\ndef test_mean():\n"
    "    assert mean([1, 2, 3]) == 2, 'mean of 1, 2, 3'\n\n\ndef test_top():\n    assert top([1, 5, 2]) == 5\n",
    "tests/test_legacy.py": "def test_legacy_format():\n    assert 'a' == 'b', 'broken for years'\n",
}
TEXT = "tests/test_ops.py::test_mean fails: mean() divides by the wrong count."


def _task(repo: Path, name: str, text: str = TEXT, **budgets: object) -> TaskSubmitted:
    return TaskSubmitted(
        text=text,
        repo=str(repo),
        mode="execute",
        models=ModelNames(default=f"function:{SCRIPTED}:{name}"),
        budgets=Budgets(**budgets),  # pyright: ignore[reportArgumentType] - budgets are literals of each test, validated by pydantic
    )


async def test_the_verdict_sends_a_patch_that_fixes_nothing_back_and_the_cost_budget_binds(
    pipeline, tmp_path: Path
) -> None:
    """Three tasks on one pipeline:
    - a coder whose first patch (`len(xs) + 1`) leaves test_mean failing is sent back with the
      test's id and assertion message, fixes it, and the task ends `done`, `passed`, 1 revision,
      the unrelated old failure listed, unblamed;
    - a coder that never fixes it is handed off with `test.still_failing` once its revision fails too;
    - a model priced as gpt-4o under a $0.02 budget is stopped mid-step with `budget.cost`, its
      spend in the usage per role;
    - in a repository where no test fails, a fix whose only evidence is the task's example (it
      raised before, and runs clean with the patch) passes on that evidence."""
    record = tmp_path / "prompts.txt"
    results = {}

    async def run(key: str, task: TaskSubmitted) -> None:
        results[key] = await pipeline(task)

    async with anyio.create_task_group() as tg:
        repo = make_repo(tmp_path / "fixed", FILES)
        tg.start_soon(run, "fixed", _task(repo, "fix_on_feedback", f"{TEXT}\nrecord: {record}"))
        tg.start_soon(
            run, "never", _task(make_repo(tmp_path / "never", FILES), "never_fixed", max_revisions=1)
        )
        tg.start_soon(
            run, "cost", _task(make_repo(tmp_path / "cost", FILES), "priced_busy", max_cost_usd=0.02)
        )
        calc = make_repo(
            tmp_path / "example",
            {**CALC, "calc/__init__.py": CALC["calc/__init__.py"].replace("a - b", "a + b")},
        )
        crash = "mean() crashes on no values\n\n```\n>>> from calc.stats import mean\n>>> mean([])\n```\nIt should give 0."
        scripted = ModelNames(default=model("fix_where_it_raised"))
        tg.start_soon(run, "example", _task(calc, "", crash).model_copy(update={"models": scripted}))

    fixed = results["fixed"]
    assert fixed.status == "done", fixed.report
    assert fixed.revisions == 1 and fixed.verification.verdict == "passed"
    assert fixed.verification.evidence == ["tests/test_ops.py::test_mean"]
    assert fixed.verification.preexisting == ["tests/test_legacy.py::test_legacy_format"]
    assert "len(xs))" in fixed.patch
    revision = record.read_text().split("\x1e")[1]
    assert "[test.still_failing] tests/test_ops.py::test_mean" in revision and "mean of 1, 2, 3" in revision

    never = results["never"]
    assert never.status == "handed_off" and never.failure_class == "test.still_failing", never.report
    assert never.revisions == 1 and never.verification.verdict == "failed"
    assert "tests/test_ops.py::test_mean" in {f.test_id for f in never.verification.failures}

    cost = results["cost"]
    assert cost.status == "handed_off" and cost.failure_class == "budget.cost", cost.report
    by_role = cost.usage["by_role"]
    assert by_role["planner"]["cost_usd"] == pytest.approx(0.0075)
    # The coder's calls are refused once its step spent the $0.0125 the planner left.
    assert by_role["coder"]["cost_usd"] == pytest.approx(0.015)
    assert cost.usage["cost_usd"] == pytest.approx(0.0225)

    example = results["example"]
    assert example.status == "done" and example.verification.verdict == "passed", example.report
    assert (
        example.verification.evidence
        and "the task's example `mean([])` raised ZeroDivisionError" in example.verification.evidence[0]
        and "runs clean with it" in example.verification.evidence[0]
    )
