"""The scripted models of `examples/models/scripted.py` drive a real pydantic-ai Agent through
real MCP servers on a copy of `examples/bugfix`: what `make run` and the pipeline tests rely on."""

import re
from pathlib import Path

import anyio
import pytest

from tests.examples.harness import (
    EXAMPLES,
    coder_prompt,
    copy_repo,
    pytest_on,
    run_coder,
    run_planner,
    scripted,
)

pytestmark = pytest.mark.anyio

BUGFIX = EXAMPLES / "bugfix"
FAILING = [
    "tests/test_discounts.py::test_discount_applies_at_the_tier_minimum",
    "tests/test_invoice.py::test_ten_notebooks_get_the_bulk_discount",
]


def bug_report() -> str:
    """The task `make run` submits."""
    return (EXAMPLES / "bugfix-report.md").read_text().strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return copy_repo(BUGFIX, tmp_path / "bugfix")


async def test_the_example_project_fails_exactly_the_tests_its_bug_report_names(repo: Path) -> None:
    """The example must carry one genuine bug: the bug report `make run` submits names the failing tests."""
    out = await pytest_on(repo)
    failed = sorted(re.findall(r"^FAILED (\S+)", out.stdout, re.M))
    assert failed == FAILING, out.stdout[-2000:]
    assert all(node in bug_report() for node in FAILING)


async def test_fix_coder_finds_and_fixes_the_bug_by_running_the_tests(repo: Path) -> None:
    """`fix` in execute mode: runs the tests, reads what they exercise, changes the code until the
    failing tests pass; afterwards the whole suite of the copy passes under plain pytest."""
    with anyio.fail_after(120):
        run = await run_coder(scripted("fix"), repo, coder_prompt(bug_report(), []), mode="execute")
    assert (await pytest_on(repo)).returncode == 0
    calls = run.tool_calls()
    assert calls[1] == ("run_tests", {})
    assert ("read_file", {"path": "invoicing/discounts.py"}) in calls
    assert [c for c in calls if c[0] == "write_file"][-1][1]["path"] == "invoicing/discounts.py"
    assert (
        "invoicing/discounts.py:31" in run.output and "-> `if quantity >= tier.min_quantity:`" in run.output
    )
    diff = (repo / "invoicing" / "discounts.py").read_text()
    assert "if quantity >= tier.min_quantity:" in diff and "if quantity < 0:" in diff


async def test_fix_coder_without_a_test_runner_uses_the_tests_the_task_names(repo: Path) -> None:
    """In write mode no run_tests is offered: the failing tests come from the task text and the
    best ranked change is applied unverified."""
    with anyio.fail_after(60):
        run = await run_coder(scripted("fix"), repo, coder_prompt(bug_report(), []), mode="write")
    assert all(tool != "run_tests" for tool, _ in run.tool_calls())
    assert "not verified" in run.output
    assert (await pytest_on(repo)).returncode != 0 or "discounts.py" in run.output


async def test_wrong_fix_leaves_the_tests_failing_then_fixes_them_from_the_feedback(repo: Path) -> None:
    """`wrong_fix`: a first attempt that changes a file but not the outcome; revising with the
    verifier's failure lines, it removes its own change and fixes the bug."""
    with anyio.fail_after(120):
        first = await run_coder(scripted("wrong_fix"), repo, coder_prompt(bug_report(), []), mode="execute")
    assert any(tool == "write_file" for tool, _ in first.tool_calls())
    assert "codeloop-scripted" in (repo / "invoicing" / "discounts.py").read_text()
    assert (await pytest_on(repo, *FAILING)).returncode != 0
    feedback = "\n".join(
        f"- [test.assertion] {node} {node.split('::')[0]}:20 assert failed" for node in FAILING
    )
    with anyio.fail_after(120):
        await run_coder(
            scripted("wrong_fix"), repo, coder_prompt(bug_report(), [], feedback=feedback), mode="execute"
        )
    assert (await pytest_on(repo)).returncode == 0
    assert "codeloop-scripted" not in (repo / "invoicing" / "discounts.py").read_text()


async def test_explain_answers_in_read_mode_citing_real_lines(repo: Path) -> None:
    """`explain` (read mode, no write tool offered): every `path:line` it cites exists and shows
    the code it quotes."""
    task = "How is the quantity discount rate chosen in `discount_rate`? Which tiers exist?"
    with anyio.fail_after(60):
        run = await run_coder(
            scripted("explain"), repo, coder_prompt(task, ["invoicing/discounts.py"]), mode="read"
        )
    assert all(tool in {"list_files", "read_file"} for tool, _ in run.tool_calls())
    cited = re.findall(r"^- ([\w/.]+):(\d+)[^:]*: `(.*)`$", run.output, re.M)
    assert cited and any(path == "invoicing/discounts.py" for path, _, _ in cited)
    for path, line, code in cited:
        assert (repo / path).read_text().splitlines()[int(line) - 1].strip() == code


async def test_loop_repeats_one_call_until_a_limit_stops_it(repo: Path) -> None:
    """`loop` never finishes by itself: the request limit ends it, every call identical."""
    from pydantic_ai.exceptions import UsageLimitExceeded

    with anyio.fail_after(60), pytest.raises(UsageLimitExceeded):
        await run_coder(scripted("loop"), repo, coder_prompt("anything", []), mode="read", request_limit=5)


async def test_planner_plans_from_the_task_and_the_files_found() -> None:
    """As planner each function answers with a Plan naming the found files and the task's tests."""
    prompt = (
        f"## Task (execute mode)\n{bug_report()}\n\n## Repository map\n(empty)\n\n"
        "## Files a search for the task found\n- invoicing/discounts.py\n- tests/test_discounts.py"
    )
    plan = await run_planner(scripted("fix"), prompt)
    assert "invoicing/discounts.py" in plan.files_of_interest
    assert set(FAILING) <= set(plan.test_targets) and plan.revision_reason is None


async def test_slow_spends_its_delay_in_every_decision_so_a_deadline_stops_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`slow` sleeps before deciding (CODELOOP_SCRIPTED_DELAY_S): a run's timeout ends it mid-task."""
    from pydantic_ai import Agent

    monkeypatch.setenv("CODELOOP_SCRIPTED_DELAY_S", "30")
    agent = Agent(scripted("slow"), output_type=str)
    with anyio.fail_after(20), pytest.raises(TimeoutError):
        await agent.run("## Task\nanything", timeout=0.5)


async def test_fix_follows_a_machine_readable_replace_line(repo: Path) -> None:
    """The documented convention for mechanics tasks: ``replace `OLD` with `NEW` in `PATH` ``
    makes exactly that edit, then the tests run."""
    task = "Please replace `quantity > tier.min_quantity` with `quantity >= tier.min_quantity` in `invoicing/discounts.py`."
    with anyio.fail_after(120):
        run = await run_coder(scripted("fix"), repo, coder_prompt(task, []), mode="execute")
    assert [tool for tool, _ in run.tool_calls()] == ["read_file", "write_file", "run_tests"]
    assert "17 passed, 0 failed" in run.output
    assert (await pytest_on(repo)).returncode == 0
