"""The `verify` kind: run the checks and the tests; a failed verdict sends the coder back.

Without a code stage (diagnose mode) the verification of the unmodified tree is the task's
answer. While a task is still making its attempts (`budgets.attempts` above 1, a `select` stage
after this one) a failed verdict is that attempt's verdict and the task goes on to the next stage. A failed verdict is a revision, within the task's revisions, unless the same failures
came back after one (the task is handed off); after `REPLAN_AFTER_FAILED_REVISIONS` failed
revisions of one plan the planner is asked for a new one.
"""

from agents.budgets import budget_used_up
from agents.feedback import revision_feedback
from agents.messages import Plan, TaskState, VerificationReport, VerifyRequest, VerifyResult
from agents.orchestrator.io import Emit
from agents.orchestrator.report import diagnosis
from agents.orchestrator.stages.kind import (
    Advance,
    At,
    End,
    Revisit,
    StageKind,
    deadline_of,
    gathering_attempts,
)
from agents.wording import counted, one_line

REPLAN_AFTER_FAILED_REVISIONS = 2
"""Failed revisions of one plan after which the planner is asked for a new plan."""


def _request(state: TaskState, at: At) -> VerifyRequest:
    task = state.task
    return VerifyRequest(
        step_id=at.step_id,
        task=task,
        plan=state.plan or Plan(),
        patch=state.patch,
        answer=state.answer if task.mode == "read" else None,
        baseline=state.baseline,
        deadline_at=deadline_of(state),
        raised_before=list(state.context.raised) if state.context and task.mode == "execute" else [],
        approved_paths=[a.path for a in state.approvals],
    )


def _react(state: TaskState, result: VerifyResult, at: At) -> Advance | Revisit | End:
    report = result.report
    state = state.model_copy(update={"last_report": report, "baseline": result.baseline or state.baseline})
    checks = [c.model_dump(mode="json") for c in report.checks]
    told = f"verdict {report.verdict}: {counted(len(report.failures), 'failure')}"
    data: dict[str, object] = {"verdict": report.verdict, "checks": checks}
    if state.task.budgets.attempts > 1:
        told = f"attempt {state.attempt}: {told}"
        data["attempt"] = state.attempt
    events = (Emit("verification", told, data),)
    if at.index_of("code") is None:  # diagnose: nothing was changed, the report is the answer
        return End(state, "diagnosed", None, diagnosis(state), events)
    if gathering_attempts(state, at):  # a candidate's verdict: the select stage weighs it
        return Advance(state, events)
    if report.verdict == "unverified" and state.task.require_verified and state.task.mode != "read":
        why = f"The task requires a verified patch, and its verification was {report.summary}"
        return End(state, "handed_off", "verify.unverified", why, events)
    if report.verdict != "failed":
        return Advance(state, events)
    signature = failure_signature(report)
    if state.failure_signatures and state.failure_signatures[-1] == signature:
        cls = report.failures[0].failure_class if report.failures else "verify.failed"
        return End(state, "handed_off", cls, "The same failures came back after a revision.", events)
    state = state.model_copy(update={"failure_signatures": [*state.failure_signatures, signature]})
    if state.revisions >= state.task.budgets.max_revisions:
        words = budget_used_up("budget.revisions", state.task.budgets, used=state.revisions)
        return End(state, "handed_off", "budget.revisions", words, events)
    state = state.model_copy(
        update={
            "revisions": state.revisions + 1,
            "failed_revisions_since_plan": state.failed_revisions_since_plan + 1,
        }
    )
    events += (
        Emit("transition", f"revising ({state.revisions})", {"status": "revising", "role": "orchestrator"}),
    )
    plan = at.index_of("plan")
    if state.failed_revisions_since_plan > REPLAN_AFTER_FAILED_REVISIONS and plan is not None:
        return Revisit(state.model_copy(update={"failed_revisions_since_plan": 0}), plan, events)
    return Revisit(state, at.index_of("code") or 0, events)


def failure_signature(report: VerificationReport) -> str:
    """What identifies a failed verification's failures: the same signature after a revision
    means the revision changed nothing that matters."""
    return "|".join(sorted(f"{f.failure_class}:{f.test_id}:{f.path}" for f in report.failures))


def _account(state: TaskState) -> list[str]:
    """The last verification, for the account a continuation carries: its failures for the
    coder, else its verdict; that it never ran, when it did not."""
    report = state.last_report
    if report is None:
        return ["It was never verified."]
    if report.failures:
        return [revision_feedback(report)]
    return [f"The verifier said: {report.verdict}: {one_line(report.summary, 600)}"]


VERIFY = StageKind(
    name="verify",
    request=VerifyRequest,
    result=VerifyResult,
    status="verifying",
    phase=3,
    event="verification",
    build=_request,
    react=_react,
    account=_account,
    description="run the checks and the tests; a failed verdict sends the coder back",
)
