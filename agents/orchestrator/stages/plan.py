"""The `plan` kind: make the task's plan, or revise it after failed revisions."""

from agents.messages import Plan, PlanRequest, PlanResult, PlanRevision, TaskState
from agents.orchestrator.io import Emit
from agents.orchestrator.stages.kind import Advance, At, StageKind, step_budget, verifier_feedback


def _request(state: TaskState, at: At) -> PlanRequest:
    revising = state.plan is not None
    # A continued task's first plan revises its parent's (the account reaches the planner in the
    # task's `continuation`, not as feedback: the parent may have ended done).
    inherited = state.task.continuation.plan if state.task.continuation else None
    return PlanRequest(
        step_id=at.step_id,
        task=state.task,
        budget=step_budget(state),
        previous=state.plan if revising else inherited,
        feedback=verifier_feedback(state) if revising else None,
    )


def _react(state: TaskState, result: PlanResult, at: At) -> Advance:
    history = list(state.plan_history)
    continuation = state.task.continuation
    if state.plan is None and continuation is not None and continuation.plan is not None:
        reason = result.plan.revision_reason or f"continued from task {continuation.parent_task_id}"
        history.append(PlanRevision(plan=continuation.plan, reason=reason, at_step=0))
    if state.plan is not None:  # a revision: keep the replaced plan with the new one's reason
        history.append(
            PlanRevision(
                plan=state.plan, reason=result.plan.revision_reason or "revised", at_step=state.step_seq
            )
        )
    state = state.model_copy(update={"plan": result.plan, "plan_history": history})
    return Advance(
        state, (Emit("plan", _plan_line(result.plan), {"plan": result.plan.model_dump(mode="json")}),)
    )


def _plan_line(plan: Plan) -> str:
    first = plan.steps[0].description if plan.steps else "no steps"
    return f"plan of {len(plan.steps)} steps: {first[:100]}" + (
        f" (revised: {plan.revision_reason[:100]})" if plan.revision_reason else ""
    )


PLAN = StageKind(
    name="plan",
    request=PlanRequest,
    result=PlanResult,
    status="planning",
    phase=0,
    once=True,
    event="plan",
    model_budgets=True,
    build=_request,
    react=_react,
    description="make or revise the task's plan",
)
