"""The `echo` kind: the bus's smoke test, one hop through a role that sends the task's text back."""

from agents.messages import EchoRequest, EchoResult, TaskState
from agents.orchestrator.stages.kind import Advance, At, StageKind


def _request(state: TaskState, at: At) -> EchoRequest:
    return EchoRequest(text=state.task.text)


def _react(state: TaskState, result: EchoResult, at: At) -> Advance:
    return Advance(state.model_copy(update={"answer": result.text}))


ECHO = StageKind(
    name="echo",
    request=EchoRequest,
    result=EchoResult,
    status="coding",
    phase=0,
    build=_request,
    react=_react,
    description="the bus's smoke test: send the task's text back",
)
