"""A task's options are one model (`TaskOptions`): the same options, with the same names, reach
`run`, `submit` and `eval` as flags, the tasks server's `submit_task` as arguments, the
configuration as its top layer, and the documentation's table."""

import re
from pathlib import Path

import pytest
import typer.main
from pydantic import JsonValue

from agents.messages import Budgets
from codeloop.cli import app
from codeloop.config.task_options import TaskOptions
from codeloop.services.tasks_backend import check_submission
from tool_servers.tasks.backend import Submission, SubmissionRefused
from tool_servers.tasks.views import submit_task_args

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "models" / "scripted.py"


def _flags(command: str) -> set[str]:
    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined] - the root command of a typer app with subcommands is a click Group
    return {opt for param in click_command.params for opt in param.opts if opt.startswith("--")}


def test_the_documented_table_names_each_option_as_the_model_does() -> None:
    """docs/configuration.md, "A task's options": one row per option, its flag, key and argument."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text.split("## A task's options", 1)[1].split("\n## ", 1)[0]
    lines = [
        line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| option")
    ]
    rows = [line.split("|")[2:-1] for line in lines]
    documented = {found[0] for row in rows for cell in row if (found := re.findall(r"`([^`]+)`", cell))}
    expected = {name for s in TaskOptions.spellings().values() for name in (s.flag, s.key, s.argument)}
    assert len(rows) == len(TaskOptions.model_fields)
    assert documented - {"[pipelines]"} == expected - {None}


def test_run_and_submit_take_every_option_and_eval_the_models_cost_and_pipeline() -> None:
    """Our CLI contract: the task options are flags of `run` and `submit`; `eval` takes only what
    applies to a whole task set (its budgets come from the configuration)."""
    flags = {s.flag for s in TaskOptions.spellings().values()}
    assert flags <= _flags("run") and flags <= _flags("submit")
    offered = flags & _flags("eval")
    assert offered == {"--model", "--planner-model", "--coder-model", "--cost-budget", "--pipeline"}


def test_submit_task_takes_every_option_with_the_range_its_budget_allows() -> None:
    """The tasks server's `submit_task` schema is `task`, `repo`, `mode` and the options by their
    argument names, each budget with the range the configuration enforces (`Budgets`)."""
    schema = submit_task_args(TaskOptions.arguments_model()).model_json_schema()
    arguments = {s.argument for s in TaskOptions.spellings().values()}
    assert set(schema["properties"]) == {"task", "repo", "mode", *arguments}
    assert "cost_budget_usd" in schema["properties"]

    def lowest(name: str) -> dict[str, object]:
        bound = next(branch for branch in schema["properties"][name]["anyOf"] if branch["type"] != "null")
        return {k: v for k, v in bound.items() if k in ("minimum", "exclusiveMinimum")}

    assert lowest("max_steps") == {"minimum": 1} and lowest("timeout_s") == {"exclusiveMinimum": 0}
    assert lowest("cost_budget_usd") == {"exclusiveMinimum": 0}
    assert Budgets.model_fields["max_cost_usd"].metadata[0].gt == 0  # the range it copies


def test_the_tasks_server_refuses_a_cost_budget_it_cannot_price_and_carries_one_it_can(
    tmp_path: Path,
) -> None:
    """The tasks server takes the cost budget too, checked as `run --cost-budget` is: a model
    without a price is refused naming the argument; a priced one gets the budget."""

    def submission(model: str, budget: float) -> Submission:
        options = {"model": f"function:{SCRIPTED}:{model}", "cost_budget_usd": budget}
        return Submission(principal="p", text="t", repo=tmp_path, mode="read", options=options)

    with pytest.raises(SubmissionRefused, match="cost_budget_usd needs a price for every model"):
        check_submission(submission("fix", 0.5))
    _, budgets, _, _ = check_submission(submission("fix_priced", 0.5))
    assert budgets.max_cost_usd == 0.5
    with pytest.raises(SubmissionRefused, match="cost_budget_usd: Input should be greater than 0") as refused:
        check_submission(submission("fix_priced", 0.0))
    assert refused.value.details["field"] == "cost_budget_usd"


def test_attempts_reach_the_task_from_the_tasks_server_and_the_configuration_in_range(tmp_path: Path) -> None:
    """Our contract: `attempts` is the tasks server's argument as `--attempts` is the flag and
    `[budgets] attempts` the key; out of its range (1 to 10) it is refused naming the argument."""

    def submission(**options: JsonValue) -> Submission:
        options = {"model": f"function:{SCRIPTED}:fix", **options}
        return Submission(principal="p", text="t", repo=tmp_path, mode="write", options=options)

    assert check_submission(submission(attempts=3))[1].attempts == 3
    with pytest.raises(SubmissionRefused, match="attempts: Input should be less than or equal to 10"):
        check_submission(submission(attempts=11))
    (tmp_path / "codeloop.toml").write_text("[budgets]\nattempts = 2\n")
    assert check_submission(submission())[1].attempts == 2
