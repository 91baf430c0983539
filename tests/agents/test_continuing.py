"""What a continued task inherits from its parent's record, which tasks can go on, and how the
plan and code stages start from the inheritance (pure functions: no bus, no model)."""

from datetime import UTC, datetime

import pytest

from agents.continuing import (
    INSTRUCTION_HEADING,
    CannotContinue,
    account_of,
    continued_by,
    continued_submission,
)
from agents.failures import FailureClass
from agents.messages import (
    Approval,
    Budgets,
    CodeRequest,
    Context,
    ModelNames,
    Plan,
    PlanRequest,
    PlanResult,
    PlanStep,
    TaskResult,
    TaskState,
    TaskSubmitted,
    Usage,
)
from agents.messages.verification import Failure, VerificationReport
from agents.orchestrator.io import Dispatch, Start, StepDone
from agents.orchestrator.machine import transition
from agents.orchestrator.pipeline import FIX
from agents.orchestrator.report import build_result, handoff_report
from agents.workspace.snapshot import SnapshotRef

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PATCH = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-return a - b\n+return a + b\n"
PLAN = Plan(steps=[PlanStep(description="fix add")], files_of_interest=["calc.py"])


def _snapshot() -> SnapshotRef:
    return SnapshotRef(digest="d" * 64, files=1, bytes=14, source_path="/r")


def _parent(status: str = "handed_off", **changes: object) -> TaskState:
    task = TaskSubmitted(
        text="add(2, 3) is wrong",
        repo="/r",
        mode="write",
        models=ModelNames(default="function:/m.py:f"),
        budgets=Budgets(max_steps=3),
        snapshot=_snapshot(),
    )
    state = TaskState(
        task_id="parent1",
        status="coding",
        task=task,
        created_at=T0,
        updated_at=T0,
        plan=PLAN,
        patch=PATCH,
        files_changed=["calc.py"],
        answer="fixed add, mul still to do",
        usage=Usage(requests=3),
        steps_done=["01-plan", "02-retrieve", "03-code"],
        approvals=[Approval(path=".github/ci.yml", approved_by="alice", request_id="r1", question="write?")],
        last_report=VerificationReport(
            verdict="failed",
            summary="1 failing test",
            failures=[
                Failure(
                    failure_class=FailureClass.TEST_STILL_FAILING,
                    test_id="tests/test_calc.py::test_mul",
                    message="8 != 6",
                )
            ],
        ),
    )
    state = state.model_copy(update={"status": status, **changes})
    result = build_result(state, failure_class="budget.steps", report="Handed off: budget", now=T0)
    return state.model_copy(update={"result": result})


def test_the_submission_inherits_snapshot_patch_plan_account_and_takes_fresh_budgets() -> None:
    """docs/continuing.md: the same snapshot, the parent's patch, plan and account; fresh budgets."""
    parent = _parent()
    task = continued_submission(parent, instruction="  also mul  ", budgets=Budgets(max_steps=30))
    continuation = task.continuation
    assert continuation is not None
    assert (
        task.snapshot == parent.task.snapshot and task.mode == "write" and task.models == parent.task.models
    )
    assert task.budgets.max_steps == 30
    assert task.text == f"add(2, 3) is wrong\n\n{INSTRUCTION_HEADING}: also mul"
    assert (continuation.parent_task_id, continuation.chain, continuation.instruction) == (
        "parent1",
        ["parent1"],
        "also mul",
    )
    assert continuation.patch == PATCH and continuation.plan == PLAN
    assert continuation.approvals == parent.approvals and continuation.approvals[0].path == ".github/ci.yml"
    assert continuation.ended == "handed_off (budget.steps)"
    assert "tests/test_calc.py::test_mul" in continuation.account and "calc.py" in continuation.account
    brief = continuation.brief()
    assert "continues task parent1, which ended handed_off (budget.steps)" in brief
    assert "already in the workspace (calc.py)" in brief and brief.endswith("also mul")
    # Models given replace the parent's; a second continuation lengthens the chain.
    other = ModelNames(default="openai:gpt-4o")
    assert continued_submission(parent, instruction=None, budgets=Budgets(), models=other).models == other
    child = TaskState(task_id="child1", status="done", task=task, created_at=T0, updated_at=T0)
    grandchild = continued_submission(child, instruction=None, budgets=Budgets())
    assert grandchild.continuation is not None and grandchild.continuation.chain == ["parent1", "child1"]
    assert grandchild.text == task.text  # no new instruction: the text as it was
    assert continued_by("parent1", [child, parent]) == ["child1"]


@pytest.mark.parametrize(
    ("status", "says"),
    [("coding", "still running (coding)"), ("submitted", "still running"), ("rejected", "rejected")],
)
def test_a_running_or_rejected_task_cannot_be_continued(status: str, says: str) -> None:
    """Only an ended task that ran can go on; the message says why and what to do."""
    with pytest.raises(CannotContinue, match=r"task parent1 .*" + says.split(" (")[0]) as refused:
        continued_submission(_parent(status), instruction=None, budgets=Budgets())
    assert says in str(refused.value) and refused.value.status == status


def test_the_account_is_compact_and_says_how_the_parent_ended() -> None:
    """The account comes from the record and stays within its cap, however long the answer."""
    account = account_of(_parent(answer="x" * 50_000))
    assert "It ended handed_off (budget.steps) after 3 model requests, 3 steps" in account
    assert len(account) < 8 * 1024


def test_the_first_plan_and_code_steps_start_from_the_parent() -> None:
    """The planner revises the parent's plan; the first coding starts from the parent's patch; the
    result links back to the parent and its plan history names the continuation."""
    task = continued_submission(_parent(), instruction="also mul", budgets=Budgets(max_steps=30))
    state = TaskState(
        task_id="child1", status="submitted", task=task, created_at=T0, updated_at=T0, patch=PATCH
    )
    outcome = transition(state, Start(), pipeline=FIX, now=T0)
    plan_request = next(c.payload for c in outcome.commands if isinstance(c, Dispatch))
    assert isinstance(plan_request, PlanRequest) and plan_request.previous == PLAN
    assert plan_request.feedback is None
    state = outcome.state
    new_plan = Plan(steps=[PlanStep(description="fix mul too")])
    outcome = transition(
        state,
        StepDone(state.expected_step or "", "planner", PlanResult(step_id="", plan=new_plan)),
        pipeline=FIX,
        now=T0,
    )
    state = outcome.state
    assert (
        state.plan_history[0].plan == PLAN and state.plan_history[0].reason == "continued from task parent1"
    )
    outcome = transition(
        state, StepDone(state.expected_step or "", "retriever", Context(step_id="")), pipeline=FIX, now=T0
    )
    code = next(c.payload for c in outcome.commands if isinstance(c, Dispatch))
    assert isinstance(code, CodeRequest) and code.previous_patch == PATCH
    result = build_result(outcome.state, failure_class=None, report="", now=T0)
    assert isinstance(result, TaskResult) and result.parent_task_id == "parent1"
    assert result.patch == PATCH  # the work so far, before the coder answers
    assert "codeloop continue child1" in handoff_report(outcome.state, "budget.steps", "a budget")
