"""The `review` kind: approve the patch, request changes (a revision) or reject the task.

A pipeline may have several review stages, each after a code stage; each keeps its own count of
rounds. `request_changes` sends the coder back with the review's findings, counted against the
task's revisions like a failed verification.

Everything the review kind means is here: the status a task shows while a review runs
(`reviewing`), the request built from the record, the reaction to each verdict (`reject` ends the
task `failed` with `review.rejected`), the round kept on the record and shown in the result
(`TaskState.reviews`, `TaskResult.reviews`: wire fields of `agents.messages`, as the request and
result are), the feedback the coder's next revision gets (`TaskState.review_feedback`, which the
code kind passes on), and the last reviews in the account of an ended task.
"""

from agents.messages import Context, Finding, Plan, ReviewRequest, ReviewResult, ReviewRound, TaskState
from agents.orchestrator.io import Emit
from agents.orchestrator.stages.kind import Advance, At, End, Revisit, StageKind, step_budget
from agents.wording import one_line


def _request(state: TaskState, at: At) -> ReviewRequest:
    done = sum(1 for r in state.reviews if r.role == at.role)
    return ReviewRequest(
        step_id=at.step_id,
        task=state.task,
        plan=state.plan or Plan(),
        context=state.context or Context(step_id=""),
        patch=state.patch,
        files_changed=list(state.files_changed),
        answer=state.answer,
        report=state.last_report,
        round=done + 1,
        budget=step_budget(state),
    )


def _react(state: TaskState, result: ReviewResult, at: At) -> Advance | Revisit | End:
    role = at.role
    review = ReviewRound(
        step_id=result.step_id,
        role=role,
        verdict=result.verdict,
        findings=list(result.findings),
        feedback=result.feedback,
    )
    state = state.model_copy(update={"reviews": [*state.reviews, review]})
    findings = [f.model_dump(mode="json", exclude_none=True) for f in result.findings]
    told = f"{role}: {result.verdict}, {len(result.findings)} findings"
    events = (
        Emit("review", told, {"verdict": result.verdict, "findings": findings, "feedback": result.feedback}),
    )
    if result.verdict == "approve":
        return Advance(state, events)
    if result.verdict == "reject":
        lines = [f"The {role} rejected the change: {result.feedback or 'no reason given'}"]
        lines += [f"  - {_finding_line(f)}" for f in result.findings[:20]]
        return End(state, "failed", "review.rejected", "\n".join(lines), events)
    code = at.index_of("code")
    if code is None or code > at.index:  # unreachable for a checked pipeline: review needs a code stage
        return End(
            state, "failed", "review.rejected", f"The {role} requested changes, but nothing codes.", events
        )
    if state.revisions >= state.task.budgets.max_revisions:
        return End(state, "handed_off", "budget.revisions", "The revision budget is used up.", events)
    state = state.model_copy(
        update={"revisions": state.revisions + 1, "review_feedback": _review_feedback(role, result)}
    )
    revising = Emit(
        "transition",
        f"revising ({state.revisions}): {role} requested changes",
        {"status": "revising", "role": "orchestrator", "requested_by": role},
    )
    return Revisit(state, code, (*events, revising))


def _review_feedback(role: str, result: ReviewResult) -> str:
    lines = [f"The {role} reviewed the patch and requested changes."]
    if result.feedback:
        lines.append(result.feedback)
    lines += [f"- {_finding_line(f)}" for f in result.findings[:20]]
    return "\n".join(lines)


def _finding_line(finding: Finding) -> str:
    where = finding.path + (f":{finding.line}" if finding.line else "") + ": " if finding.path else ""
    rule = f" [{finding.rule}]" if finding.rule else ""
    return f"{where}{finding.message}{rule}"


def _account(state: TaskState) -> list[str]:
    """The last two reviews, for the account a continuation carries: who, the verdict, what they asked."""
    lines: list[str] = []
    for review in state.reviews[-2:]:
        said = review.feedback or "; ".join(f.message for f in review.findings[:3])
        lines.append(
            f"Review by {review.role}: {review.verdict}" + (f": {one_line(said, 600)}" if said else "")
        )
    return lines


REVIEW = StageKind(
    name="review",
    request=ReviewRequest,
    result=ReviewResult,
    status="reviewing",
    phase=3,
    after=("code",),
    event="review",
    build=_request,
    react=_react,
    account=_account,
    description="approve the patch, request changes (a revision) or reject the task",
)
