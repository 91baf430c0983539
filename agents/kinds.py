"""The stage kinds: what a pipeline stage of each kind is sent, what it answers, and where it may stand.

A pipeline (`agents/orchestrator/pipeline.py`) is a list of `KIND:ROLE` stages. The kind decides
the messages — the request the orchestrator builds for the stage and the result type it accepts —
the status a task shows meanwhile, and the order rules a pipeline is checked against before a
task is accepted. This module is the one place that knows the kinds: a role declares its kind
here (`agents/runtime/api.py`), the orchestrator's state machine looks a result's kind up here, and
`pipeline_problems` checks a pipeline's order here. A new kind is one `StageKind` added to
`KINDS`, plus the machine's reaction to its result.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from agents.messages import (
    CodeRequest,
    CodeResult,
    Context,
    ContextRequest,
    PlanRequest,
    PlanResult,
    ReviewRequest,
    ReviewResult,
    TaskStatus,
    VerifyRequest,
    VerifyResult,
)
from agents.roles.echo import EchoRequest, EchoResult
from bus.messages import Message


@dataclass(frozen=True)
class StageKind:
    name: str
    request: type[Message]
    """What a role of this kind is sent."""
    result: type[Message]
    """What it answers (or a `step_failed`)."""
    status: TaskStatus
    """The task's status while a stage of this kind runs."""
    phase: int
    """Stages stand in non-decreasing phase order: planning before retrieval before coding before
    review and verification (which may interleave)."""
    once: bool = False
    """At most one stage of this kind in a pipeline (revisions go back to it)."""
    after: tuple[str, ...] = ()
    """Kinds of which one must stand before a stage of this kind (review needs something to review)."""
    description: str = ""


KINDS: dict[str, StageKind] = {
    kind.name: kind
    for kind in (
        StageKind(
            "plan",
            PlanRequest,
            PlanResult,
            "planning",
            0,
            once=True,
            description="make or revise the task's plan",
        ),
        StageKind(
            "retrieve",
            ContextRequest,
            Context,
            "retrieving",
            1,
            description="find and pack the code the plan is about",
        ),
        StageKind(
            "code",
            CodeRequest,
            CodeResult,
            "coding",
            2,
            once=True,
            description="change the code in a scratch workspace (or answer, in read mode)",
        ),
        StageKind(
            "review",
            ReviewRequest,
            ReviewResult,
            "reviewing",
            3,
            after=("code",),
            description="approve the patch, request changes (a revision) or reject the task",
        ),
        StageKind(
            "verify",
            VerifyRequest,
            VerifyResult,
            "verifying",
            3,
            description="run the checks and tests; a failed verdict sends the coder back",
        ),
        StageKind(
            "echo",
            EchoRequest,
            EchoResult,
            "coding",
            0,
            description="the bus's smoke test: send the task's text back",
        ),
    )
}
"""Every stage kind, by name."""


def kind_of_result(result: type[Message]) -> StageKind | None:
    """The kind whose stages answer with `result`."""
    return next((kind for kind in KINDS.values() if kind.result is result), None)


def parse_stage(text: str) -> tuple[str, str]:
    """`KIND:ROLE` as (kind, role).

    Raises:
        ValueError: not of that form, or an unknown kind.
    """
    kind, sep, role = text.strip().partition(":")
    if not sep or not kind or not role:
        raise ValueError(f"stage {text!r} is not KIND:ROLE (e.g. review:security-reviewer)")
    if kind not in KINDS:
        raise ValueError(f"stage {text!r}: unknown stage kind {kind!r}; known kinds: {', '.join(KINDS)}")
    return kind, role


def pipeline_problems(stages: Sequence[tuple[str, str]]) -> list[str]:
    """What makes a pipeline of (kind, role) stages impossible to run; empty when it can run."""
    if not stages:
        return ["a pipeline needs at least one stage"]
    problems = []
    seen: list[str] = []
    for i, (kind_name, role) in enumerate(stages, 1):
        kind = KINDS.get(kind_name)
        if kind is None:
            problems.append(
                f"stage {i} ({kind_name}:{role}): unknown stage kind; known kinds: {', '.join(KINDS)}"
            )
            continue
        if kind.once and kind_name in seen:
            problems.append(f"stage {i} ({kind_name}:{role}): a pipeline has at most one {kind_name} stage")
        if kind.after and not any(k in seen for k in kind.after):
            problems.append(
                f"stage {i} ({kind_name}:{role}) must come after a {' or '.join(kind.after)} stage"
            )
        later = [k for k in seen if k in KINDS and KINDS[k].phase > kind.phase]
        if later:
            problems.append(f"stage {i} ({kind_name}:{role}) cannot come after a {later[0]} stage")
        seen.append(kind_name)
    return problems
