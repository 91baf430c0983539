"""The `retrieve` kind: find and pack the code the plan is about."""

from agents.messages import Context, ContextRequest, Plan, TaskState
from agents.orchestrator.io import Emit
from agents.orchestrator.stages.kind import Advance, At, StageKind
from agents.wording import counted


def _request(state: TaskState, at: At) -> ContextRequest:
    return ContextRequest(step_id=at.step_id, task=state.task, plan=state.plan or Plan())


def _react(state: TaskState, result: Context, at: At) -> Advance:
    state = state.model_copy(update={"context": result})
    files = [{"path": f.path, "score": round(f.score, 4)} for f in result.files[:20]]
    message = f"{counted(len(result.files), 'file')}, {counted(result.tokens, 'token')} of context"
    return Advance(state, (Emit("retrieval", message, {"files": files}),))


RETRIEVE = StageKind(
    name="retrieve",
    request=ContextRequest,
    result=Context,
    status="retrieving",
    phase=1,
    event="retrieval",
    build=_request,
    react=_react,
    description="find and pack the code the plan is about",
)
