"""The review stage kind in the transition function: approve goes on, request_changes sends the
coder back with the review's feedback (a revision, within --max-revisions), reject fails the task
as review.rejected with the findings; several review stages each keep their own place."""

from datetime import UTC, datetime

from agents.messages import (
    Budgets,
    CodeRequest,
    CodeResult,
    Finding,
    ModelNames,
    Plan,
    PlanResult,
    ReviewRequest,
    ReviewResult,
    TaskState,
    TaskSubmitted,
    VerifyRequest,
    VerifyResult,
)
from agents.messages.verification import VerificationReport
from agents.orchestrator.io import Dispatch, Finish, Start, StepDone
from agents.orchestrator.machine import transition
from agents.orchestrator.pipeline import parse_pipeline

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECURE = parse_pipeline(
    "secure", ["plan:planner", "code:coder", "review:security", "review:style", "verify:verifier"]
)
KEY = Finding(message="hard-coded key", path="app.py", line=3, rule="hardcoded-secret")


def _awaited(state: TaskState) -> str:
    """The id of the step `state` waits for (the tests drive it only while it waits for one)."""
    assert state.expected_step is not None
    return state.expected_step


def _start(max_revisions: int = 3) -> TaskState:
    task = TaskSubmitted(
        text="fix",
        repo="/r",
        mode="write",
        models=ModelNames(default="function:/x.py:f"),
        budgets=Budgets(max_revisions=max_revisions),
    )
    state = TaskState(task_id="t", status="submitted", task=task, created_at=T0, updated_at=T0)
    return transition(state, Start(), pipeline=SECURE, now=T0).state


def _answer(state: TaskState, payload_for):
    outcome = transition(
        state,
        StepDone(_awaited(state), state.stage_role, payload_for(_awaited(state))),  # pyright: ignore[reportArgumentType] - the task is in a stage with a role here
        pipeline=SECURE,
        now=T0,
    )
    return outcome.state, [c for c in outcome.commands if isinstance(c, Dispatch)], outcome


def _to_first_review(max_revisions: int = 3) -> TaskState:
    state, _, _ = _answer(_start(max_revisions), lambda s: PlanResult(step_id=s, plan=Plan()))
    state, sent, _ = _answer(state, lambda s: CodeResult(step_id=s, patch="diff-1", files_changed=["app.py"]))
    assert isinstance(sent[0].payload, ReviewRequest) and sent[0].role == "security"
    assert sent[0].payload.patch == "diff-1" and sent[0].payload.round == 1
    return state


def test_approvals_go_through_each_review_stage_to_verification() -> None:
    state = _to_first_review()
    state, sent, _ = _answer(state, lambda s: ReviewResult(step_id=s, verdict="approve"))
    assert state.status == "reviewing" and sent[0].role == "style"
    state, sent, _ = _answer(state, lambda s: ReviewResult(step_id=s, verdict="approve"))
    assert state.status == "verifying" and isinstance(sent[0].payload, VerifyRequest)
    state, _, outcome = _answer(
        state, lambda s: VerifyResult(step_id=s, report=VerificationReport(verdict="passed"))
    )
    result = next(c.result for c in outcome.commands if isinstance(c, Finish))
    assert result.status == "done" and [(r.role, r.verdict) for r in result.reviews] == [
        ("security", "approve"),
        ("style", "approve"),
    ]


def test_request_changes_is_a_revision_with_the_reviews_feedback_then_the_review_runs_again() -> None:
    state = _to_first_review()
    state, sent, _ = _answer(
        state,
        lambda s: ReviewResult(
            step_id=s, verdict="request_changes", findings=[KEY], feedback="use os.environ"
        ),
    )
    assert state.status == "coding" and state.revisions == 1
    request = sent[0].payload
    assert isinstance(request, CodeRequest) and request.previous_patch == "diff-1"
    assert "The security reviewed the patch and requested changes." in request.feedback  # pyright: ignore[reportOperatorIssue] - the feedback of a revision request is set
    assert (
        "use os.environ" in request.feedback  # pyright: ignore[reportOperatorIssue] - the feedback of a revision request is set
        and "app.py:3: hard-coded key [hardcoded-secret]" in request.feedback  # pyright: ignore[reportOperatorIssue] - the feedback of a revision request is set
    )
    state, sent, _ = _answer(state, lambda s: CodeResult(step_id=s, patch="diff-2", files_changed=["app.py"]))
    assert sent[0].role == "security" and sent[0].payload.round == 2 and sent[0].payload.patch == "diff-2"  # pyright: ignore[reportAttributeAccessIssue] - the dispatched payload is a ReviewRequest, which has round and patch
    assert state.review_feedback is None  # answered: a later verification's feedback is its own


def test_reject_fails_the_task_with_the_findings_in_the_report() -> None:
    state = _to_first_review()
    state, _, outcome = _answer(
        state, lambda s: ReviewResult(step_id=s, verdict="reject", findings=[KEY], feedback="never ship keys")
    )
    result = next(c.result for c in outcome.commands if isinstance(c, Finish))
    assert result.status == "failed" and result.failure_class == "review.rejected"
    assert "The security rejected the change: never ship keys" in result.report
    assert "app.py:3: hard-coded key [hardcoded-secret]" in result.report
    assert result.reviews[0].findings == [KEY]


def test_request_changes_past_the_revision_budget_hands_the_task_off() -> None:
    state = _to_first_review(max_revisions=0)
    state, _, outcome = _answer(
        state, lambda s: ReviewResult(step_id=s, verdict="request_changes", feedback="no")
    )
    result = next(c.result for c in outcome.commands if isinstance(c, Finish))
    assert result.status == "handed_off" and result.failure_class == "budget.revisions"


def test_a_review_result_answering_another_stage_is_ignored() -> None:
    state = _start()  # planning
    outcome = transition(
        state,
        StepDone(state.expected_step, "planner", ReviewResult(step_id=_awaited(state), verdict="approve")),  # pyright: ignore[reportArgumentType] - the task waits for a step here, the planner's
        pipeline=SECURE,
        now=T0,
    )
    assert outcome.ignored is not None and "does not answer stage plan" in outcome.ignored
