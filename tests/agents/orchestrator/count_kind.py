"""A stage kind from outside codeloop, as a plug-in package would add one: `count`, whose role
counts the words of the task's answer so far and tells the total.

This module and its two entry points — the kind under `codeloop.stages`, a role serving it under
`codeloop.roles` — are everything a new kind takes: the request and result it travels as, the
status the task shows while it counts (`counting`, a name no built-in kind has), how the
orchestrator builds the request from the task's record and how the result moves the task on.
"""

from typing import Literal

from agents.api import (
    Advance,
    At,
    Emit,
    RoleContext,
    StageKind,
    StepRequest,
    StepResult,
    TaskState,
    define_role,
)


class CountRequest(StepRequest):
    """Work for a `count` role: count the words of `text`."""

    kind: Literal["count_request"] = "count_request"
    """Always `count_request`; equals the envelope's `kind`."""
    text: str
    """The task's answer so far (its text when no stage answered yet)."""


class CountResult(StepResult):
    """A `count` role's answer."""

    kind: Literal["count_result"] = "count_result"
    """Always `count_result`; equals the envelope's `kind`."""
    words: int
    """Words in the request's `text`."""


def _request(state: TaskState, at: At) -> CountRequest:
    return CountRequest(step_id=at.step_id, task=state.task, text=state.answer or state.task.text)


def _react(state: TaskState, result: CountResult, at: At) -> Advance:
    answer = f"{state.answer or state.task.text} ({result.words} words)"
    told = Emit("count", f"{result.words} words", {"words": result.words})
    return Advance(state.model_copy(update={"answer": answer}), (told,))


COUNT = StageKind(
    name="count",
    request=CountRequest,
    result=CountResult,
    status="counting",
    phase=1,
    event="count",
    build=_request,
    react=_react,
    description="count the words of the answer so far",
)


async def _count(request: CountRequest, ctx: RoleContext) -> dict:
    return {"words": len(request.text.split())}


WORD_COUNTER = define_role("word-counter", COUNT, _count, description="counts the words it is sent")
