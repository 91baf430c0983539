"""Whole tasks through the real pipeline: the loop a user relies on, and the limits that end it."""

import json
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from agents.messages import Budgets, ModelNames, TaskSubmitted
from codeloop.testing import make_repo
from tests.e2e.conftest import model, tree_digest
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _task(repo: Path, text: str, name: str, mode: str = "write", **budgets: object) -> TaskSubmitted:
    return TaskSubmitted(
        text=text,
        repo=str(repo),
        mode=mode,  # pyright: ignore[reportArgumentType] - mode and budgets are literals of each test, validated by pydantic
        models=ModelNames(default=model(name)),
        budgets=Budgets(**budgets),  # pyright: ignore[reportArgumentType] - mode and budgets are literals of each test, validated by pydantic
    )


async def test_a_bug_is_fixed_end_to_end_and_the_checkout_is_untouched(pipeline, tmp_path: Path) -> None:
    """The closed loop: the patch applies with `git apply` to a fresh copy of the original, its
    tests pass there, and the user's checkout is byte-for-byte what it was."""
    repo = make_repo(tmp_path / "repo", CALC)
    before = tree_digest(repo)
    result = await pipeline(_task(repo, "add(2, 3) returns -1 instead of 5", "fix", mode="execute"))
    assert result.status == "done", result.report
    assert result.verification.verdict == "passed" and result.files_changed == ["calc/__init__.py"]
    assert tree_digest(repo) == before
    fresh = tmp_path / "fresh"
    shutil.copytree(repo, fresh)
    await anyio.run_process(["git", "apply", "-"], cwd=fresh, input=result.patch.encode())
    tests = await anyio.run_process(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=fresh, check=False
    )
    assert tests.returncode == 0, tests.stdout
    assert result.steps >= 2 and set(result.usage["by_role"]) >= {"planner", "coder", "retriever", "verifier"}
    assert "calc/__init__.py" in result.context["files"]


async def test_the_error_the_tasks_example_raises_leads_the_coder_to_where_it_happens(
    pipeline, tmp_path: Path
) -> None:
    """Execute mode: the retriever runs the task's example in the sandbox and hands the coder the
    error it raised and where (a file the task never names); a coder starting there fixes it."""
    files = {**CALC, "calc/__init__.py": CALC["calc/__init__.py"].replace("a - b", "a + b")}
    files["tests/test_stats.py"] += "\n\ndef test_mean_of_nothing():\n    assert mean([]) == 0\n"
    repo = make_repo(tmp_path / "repo", files)
    record = tmp_path / "seen.jsonl"
    text = (
        "mean() crashes on no values\n\n```\n>>> from calc.stats import mean\n>>> mean([])\n```\n"
        f"It should give 0.\nrecord: {record}"
    )
    result = await pipeline(_task(repo, text, "fix_where_it_raised", mode="execute"))
    assert result.status == "done", result.report
    assert result.files_changed == ["calc/stats.py"] and result.verification.verdict == "passed"
    prompt = json.loads(record.read_text().splitlines()[0])["prompt"]
    assert "- ZeroDivisionError raised at calc/stats.py:10 in mean" in prompt


async def test_a_read_mode_explanation_offers_no_write_tool_and_cites_real_files(
    pipeline, tmp_path: Path
) -> None:
    """Read mode: the coder is offered read tools only, answers, and the answer's citations are checked."""
    repo = make_repo(tmp_path / "repo", CALC)
    record = tmp_path / "seen.jsonl"
    result = await pipeline(
        _task(repo, f"Why does mean() come out wrong?\nrecord: {record}", "explain", mode="read")
    )
    assert result.status == "done", result.report
    assert "calc/__init__.py:5" in result.answer and result.patch is None
    assert result.verification.verdict in ("passed", "unverified")
    offered = {tool for line in record.read_text().splitlines() for tool in json.loads(line)["tools"]}
    assert {"read_file", "search_code", "find_symbol"} <= offered
    assert not offered & {"write_file", "apply_patch", "run_command", "run_tests"}


async def test_a_failed_verification_is_revised_with_the_failures_the_coder_is_shown(
    pipeline, tmp_path: Path
) -> None:
    """The verifier's failures reach the coder on revision, leading with the failing test and its place."""
    repo = make_repo(tmp_path / "repo", CALC)
    record = tmp_path / "seen.jsonl"
    result = await pipeline(_task(repo, f"add is wrong\nrecord: {record}", "wrong_then_right"))
    assert result.status == "done" and result.revisions == 1, result.report
    prompts = [json.loads(line)["prompt"] for line in record.read_text().splitlines()]
    revision = next(p for p in prompts if "## Your previous attempt failed verification" in p)
    assert "tests/test_calc.py::test_add" in revision and "tests/test_calc.py:" in revision


async def test_a_model_that_repeats_one_call_is_stopped_as_a_loop(pipeline, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", CALC)
    result = await pipeline(_task(repo, "fix add", "same_call_forever", max_steps=50))
    assert result.status == "handed_off" and result.failure_class == "agent.loop"
    assert "Handed off" in result.report and "list_files" in result.report


async def test_a_model_that_never_stops_is_ended_by_the_step_budget(pipeline, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", CALC)
    result = await pipeline(_task(repo, "fix add", "busy_forever", max_steps=6))
    assert result.status == "handed_off" and result.failure_class == "budget.steps"
    assert result.steps <= 6 and "Plan:" in result.report
    # In codeloop's words: the budget the user set (not the coder's share of it), what was used,
    # and what raises it; nothing of the model library's own message.
    assert "The step budget is used up: 6 of 6 model requests, all roles (max_steps)." in result.report
    assert "--max-steps N, or max_steps under [budgets]" in result.report
    assert "request_limit" not in result.report and "http" not in result.report


async def test_a_model_that_overruns_the_deadline_is_ended_by_the_clock(pipeline, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", CALC)
    result = await pipeline(_task(repo, "fix add", "slow_forever", deadline_s=12, max_steps=500))
    assert result.status == "handed_off" and result.failure_class == "budget.wall"
    assert result.usage["wall_s"] < 40
    assert "The deadline passed" in result.report and "--timeout N" in result.report


async def test_a_worker_that_never_had_the_users_path_still_completes_the_task(
    pipeline, tmp_path: Path
) -> None:
    """The snapshot is the truth: the original moved away after submission, the task still finishes."""
    repo = make_repo(tmp_path / "repo", CALC)
    moved = tmp_path / "elsewhere"
    result = await pipeline(
        _task(repo, "add(2, 3) returns -1", "fix"), before_submit=lambda: repo.rename(moved)
    )
    assert result.status == "done" and result.files_changed == ["calc/__init__.py"], result.report


async def test_a_cancelled_task_ends_cancelled_and_ignores_the_step_in_flight(
    pipeline, tmp_path: Path
) -> None:
    from agents.client import cancel_task

    repo = make_repo(tmp_path / "repo", CALC)
    results = {}

    async def cancel_when_coding() -> None:
        sub = await pipeline.bus.js.subscribe("codeloop.events.*.transition")
        async for msg in sub.messages:
            data = json.loads(msg.data)["payload"]["data"]
            if data.get("status") == "coding":
                await cancel_task(pipeline.bus, json.loads(msg.data)["task_id"], reason="changed my mind")
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_when_coding)
        results["r"] = await pipeline(_task(repo, "fix add", "slow_forever", max_steps=500))
    result = results["r"]
    assert result.status == "cancelled" and "changed my mind" in result.report


async def test_a_run_of_failing_tool_calls_is_stopped_after_the_budgeted_number(
    pipeline, tmp_path: Path
) -> None:
    """Consecutive tool failures (3 by default) end the coder's run; the hand-off says so."""
    repo = make_repo(tmp_path / "repo", CALC)
    result = await pipeline(_task(repo, "fix add", "failing_tools", max_steps=50))
    assert result.status == "handed_off" and result.failure_class == "agent.loop"
    assert "3 tool calls failed in a row" in result.report
