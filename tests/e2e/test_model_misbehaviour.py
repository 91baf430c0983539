"""The loop holds against what real models emit: each misbehaving shape is answered to the model,
counted in the usage, bounded by the budgets, and ends the task in a classified state.

The shapes are scripted (`misbehaving.py`) as real models produce them; the ones SmolLM2 produced
under llama.cpp are also replayed from its recorded output (`test_local_model_replay.py`). Real
bus, roles, MCP sessions; a coder-only pipeline (the planner's where it is the one at fault)."""

import json
from pathlib import Path

import pytest

from agents.messages import Budgets, TaskResult
from codeloop.testing import make_repo, running_pipeline

pytestmark = pytest.mark.anyio

MISBEHAVING = Path(__file__).with_name("misbehaving.py")
CALC = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


def model(name: str) -> str:
    return f"function:{MISBEHAVING}:{name}"


async def run_coder(
    tmp_path: Path,
    shape: str,
    *,
    stages: list[str] | None = None,
    roles: tuple[str, ...] = ("orchestrator", "planner", "coder"),
    **budgets: int,
) -> TaskResult:
    repo = make_repo(tmp_path / "repo", CALC)
    record = tmp_path / "record.jsonl"
    async with running_pipeline(tmp_path / "state", roles=roles) as runner:
        return await runner.run(
            f"add subtracts instead of adding\nrecord: {record}",
            repo,
            stages=stages or ["code:coder"],
            model=model(shape),
            mode="write",
            budgets=Budgets(**budgets),
            timeout_s=300,
        )


def told(tmp_path: Path) -> list[list[str]]:
    """What the model was told before each of its requests (retry prompts, tool results)."""
    lines = (tmp_path / "record.jsonl").read_text().splitlines()
    return [json.loads(line)["told"] for line in lines]


@pytest.mark.parametrize(
    ("shape", "words"),
    [
        ("malformed_then_recover", "invalid json"),
        ("unknown_tool_then_recover", "unknown tool name: 'open_file'"),
        ("wrong_types_then_recover", "invalid arguments for read_file"),
        ("missing_args_then_recover", "path"),
        ("empty_then_recover", "please return text"),
    ],
)
async def test_a_misbehaving_response_is_answered_to_the_model_and_the_loop_goes_on(
    tmp_path: Path, shape: str, words: str
) -> None:
    """Issue contract: malformed JSON, an unknown tool, wrong or missing arguments and an empty
    response are each answered to the model (a retry prompt or a tool error it can act on), counted
    as a request, and a model that then behaves finishes its task."""
    result = await run_coder(tmp_path, shape)
    seen = told(tmp_path)
    assert result.status in ("done", "failed"), result.report
    assert result.failure_class != "env.infra", result.report
    assert len(seen) == 3  # the misbehaving request, the recovered read, the answer
    assert seen[0] == []
    assert words in seen[1][0].lower(), seen[1]
    assert any("read_file [success]" in entry for entry in seen[2])
    assert result.usage["by_role"]["coder"]["requests"] == 3


@pytest.mark.parametrize(
    ("shape", "failure_class"),
    [
        ("malformed_forever", "agent.format"),
        ("unknown_tool_forever", "agent.format"),
        ("wrong_types_forever", "agent.loop"),  # the same refused call, again and again
        ("empty_forever", "agent.format"),
        ("cut_off_tool_call", "model.truncated"),
    ],
)
async def test_a_model_that_keeps_misbehaving_is_handed_off_classified_within_its_budget(
    tmp_path: Path, shape: str, failure_class: str
) -> None:
    """Issue contract: a model that never gets it right ends its task in a classified state, with
    the requests it made counted and no more than its budget allows — never an unhandled error or a hang."""
    result = await run_coder(tmp_path, shape, max_steps=10)
    assert (result.status, result.failure_class) == ("handed_off", failure_class), result.report
    requests = result.usage["by_role"]["coder"]["requests"]
    assert 1 <= requests <= 10
    assert requests == len(told(tmp_path))


async def test_a_model_that_rambles_past_its_token_limit_is_handed_off_as_truncated(tmp_path: Path) -> None:
    """Issue contract (an over-long output): text cut at the token limit is not taken as the answer."""
    result = await run_coder(tmp_path, "rambles", max_steps=10)
    assert (result.status, result.failure_class) == ("handed_off", "model.truncated"), result.report
    assert 1 <= result.usage["by_role"]["coder"]["requests"] <= 10


@pytest.mark.slow  # the planner's first look at the repository embeds it
async def test_a_planner_that_answers_in_prose_fails_its_step_classified_with_its_requests_counted(
    tmp_path: Path,
) -> None:
    """Issue contract (text where a structured answer was needed): the planner is asked again, then
    the task fails `agent.format`, its requests in the usage."""
    result = await run_coder(tmp_path, "planner_talks", stages=["plan:planner", "code:coder"], max_steps=10)
    assert (result.status, result.failure_class) == ("failed", "agent.format"), result.report
    seen = told(tmp_path)
    assert len(seen) >= 2
    assert any("failed the application's validation" in entry for entry in seen[1]), seen[1]
    assert result.usage["by_role"]["planner"]["requests"] == len(seen)


@pytest.mark.slow
async def test_a_coder_that_describes_the_fix_instead_of_making_it_is_sent_back_then_handed_off(
    tmp_path: Path,
) -> None:
    """Issue contract (text where a tool call was needed): a coder of a write task that answers in
    prose and changes nothing is not taken at its word. The verifier runs the tests on the tree it
    left unchanged, the coder's revision leads with the test still failing, and when the same
    failure comes back the task is handed off with that class and the coder's requests counted."""
    result = await run_coder(
        tmp_path,
        "coder_talks",
        stages=["code:coder", "verify:verifier"],
        roles=("orchestrator", "coder", "verifier"),
        max_revisions=1,
    )
    assert (result.status, result.failure_class) == ("handed_off", "test.still_failing"), result.report
    assert not result.patch and result.revisions == 1
    prompts = [json.loads(line)["prompt"] for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert len(prompts) == 2 == result.usage["by_role"]["coder"]["requests"]
    assert "failed verification" not in prompts[0]
    assert "## Your previous attempt failed verification" in prompts[1]
    assert "tests/test_calc.py::test_add" in prompts[1]
