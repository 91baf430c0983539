"""The `code` kind: change the code in a scratch workspace (or answer, in read mode).

With several attempts (`budgets.attempts`), each run is one attempt from the starting tree; an
attempt stopped by a budget after others were judged leaves the choice to the `select` stage
among those, instead of ending the task."""

from agents.messages import Approval, CodeRequest, CodeResult, Context, Plan, TaskState
from agents.orchestrator.io import Emit
from agents.orchestrator.stages.kind import (
    Advance,
    At,
    End,
    Revisit,
    StageKind,
    gathering_attempts,
    step_budget,
    verifier_feedback,
)
from agents.wording import counted


def _request(state: TaskState, at: At) -> CodeRequest:
    return CodeRequest(
        step_id=at.step_id,
        task=state.task,
        plan=state.plan or Plan(),
        context=state.context or Context(step_id=""),
        budget=step_budget(state),
        previous_patch=state.patch if state.revisions else _inherited_patch(state),
        feedback=(state.review_feedback or verifier_feedback(state)) if state.revisions else None,
        attempt=state.attempt,
    )


def _inherited_patch(state: TaskState) -> str | None:
    """A continued task's first coding starts from its parent's patch (its workspace is the
    parent's end), so the patch it ends with is the combined one against the same snapshot."""
    continuation = state.task.continuation
    return continuation.patch if continuation is not None else None


def _react(state: TaskState, result: CodeResult, at: At) -> Advance | Revisit | End:
    state = state.model_copy(
        update={
            "patch": result.patch or None,
            "files_changed": list(result.files_changed),
            "answer": result.answer,
            "tool_failures": result.tool_failures,
            "review_feedback": None,  # answered: the next revision's feedback is a new one
            "approvals": _merged(state.approvals, result.approvals),
        }
    )
    told = (
        f"{counted(len(result.files_changed), 'file')} changed"
        if state.task.mode != "read"
        else "answer written"
    )
    data: dict[str, object] = {"files_changed": result.files_changed, "stopped_by": result.stopped_by}
    if state.task.budgets.attempts > 1:
        told = f"attempt {state.attempt}: {told}"
        data["attempt"] = state.attempt
    events = (Emit("code", told, data),)
    select = at.index_of("select")
    if result.stopped_by and state.candidates and select is not None and gathering_attempts(state, at):
        # A budget (or a loop) ended this attempt: choose among the attempts already judged.
        stopped = state.model_copy(update={"attempts_stopped_by": result.stopped_by})
        return Revisit(stopped, select, events)
    if result.stopped_by:
        report = f"The coder stopped: {result.message}" if result.message else "The coder stopped."
        return End(state, "handed_off", result.stopped_by, report, events)
    return Advance(state, events)


def _merged(known: list[Approval], new: list[Approval]) -> list[Approval]:
    """Every approval so far, one per path (a revision keeps the changes approved before it)."""
    paths = {a.path for a in new}
    return [a for a in known if a.path not in paths] + list(new)


CODE = StageKind(
    name="code",
    request=CodeRequest,
    result=CodeResult,
    status="coding",
    read_status="answering",
    phase=2,
    once=True,
    event="code",
    model_budgets=True,
    build=_request,
    react=_react,
    description="change the code in a scratch workspace (or answer, in read mode)",
)
