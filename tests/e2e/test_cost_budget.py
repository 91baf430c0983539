"""A cost budget end to end: a scripted model priced by the configuration, a task that spends
past its budget, real roles on a real bus."""

from pathlib import Path

import pytest

from agents.messages import Budgets, ModelNames, ModelOptions, TaskSubmitted
from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_a_priced_task_past_its_cost_budget_is_handed_off_with_the_cost_per_role(
    pipeline, tmp_path: Path
) -> None:
    """Configuration contract: a price for a model genai-prices does not know makes its calls
    cost money; past `max_cost_usd` the task is handed off as `budget.cost`, and the result's
    usage shows what each role spent."""
    scripted = model("explain")
    names = ModelNames(
        default=scripted,
        options={scripted: ModelOptions(input_usd_per_mtok=10_000.0, output_usd_per_mtok=10_000.0)},
    )
    task = TaskSubmitted(
        text="what does add do?",
        repo=str(make_repo(tmp_path / "repo", CALC)),
        mode="read",
        models=names,
        budgets=Budgets(max_cost_usd=0.01),
    )
    result = await pipeline(task)
    assert (result.status, result.failure_class) == ("handed_off", "budget.cost"), result.report
    assert result.usage["cost_usd"] >= 0.01
    assert result.usage["by_role"]["planner"]["cost_usd"] > 0
