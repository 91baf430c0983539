"""Which roles a task passes through, in which order: data, not code.

A `Pipeline` is a tuple of `Stage`s; the orchestrator's transition function walks it. Each stage
names its *kind* (what the orchestrator sends and how it reads the answer: `plan`, `retrieve`,
`code`, `review`, `verify`, `echo`; see `agents/kinds.py`), the *role* whose workers do it (so a
different coder, or a security reviewer, is one `Stage(kind="review", role="security-reviewer")`
away), and the status the task shows meanwhile. `pipeline_for` picks a task's pipeline: the one
it was submitted with (`TaskSubmitted.pipeline`, `KIND:ROLE` stages from the configuration's
`[pipelines]`), else the standard one for its mode.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from agents.errors import AgentError
from agents.kinds import KINDS, parse_stage, pipeline_problems
from agents.messages import PipelineChoice, TaskStatus, TaskSubmitted

StageKind = str
KNOWN_KINDS = tuple(KINDS)


@dataclass(frozen=True)
class Stage:
    kind: StageKind
    role: str
    status: TaskStatus

    def __post_init__(self) -> None:
        if self.kind not in KNOWN_KINDS:
            raise ValueError(f"unknown stage kind {self.kind!r}; known: {', '.join(KNOWN_KINDS)}")


@dataclass(frozen=True)
class Pipeline:
    name: str
    stages: tuple[Stage, ...]

    def index(self, kind: StageKind) -> int | None:
        for i, stage in enumerate(self.stages):
            if stage.kind == kind:
                return i
        return None

    def stage(self, kind: StageKind) -> Stage | None:
        i = self.index(kind)
        return None if i is None else self.stages[i]


PLAN = Stage("plan", "planner", "planning")
RETRIEVE = Stage("retrieve", "retriever", "retrieving")
CODE = Stage("code", "coder", "coding")
ANSWER = Stage("code", "coder", "answering")
VERIFY = Stage("verify", "verifier", "verifying")

FIX = Pipeline("fix", (PLAN, RETRIEVE, CODE, VERIFY))
"""write and execute mode: plan, retrieve, code, verify (and revise)."""
EXPLAIN = Pipeline("explain", (PLAN, RETRIEVE, ANSWER, VERIFY))
"""read mode: the coder answers instead of patching; the verifier checks what the answer cites."""
DIAGNOSE = Pipeline("diagnose", (PLAN, RETRIEVE, VERIFY))
"""No model configured: a fixed plan, real retrieval, verification of the unmodified tree."""
ECHO = Pipeline("echo", (Stage("echo", "echo", "coding"),))
"""The bus's smoke pipeline: one hop through the `echo` role."""

NAMED: dict[str, Pipeline] = {p.name: p for p in (FIX, EXPLAIN, DIAGNOSE, ECHO)}


class PipelineError(AgentError, ValueError):
    """A pipeline that cannot run: the message says which stage and why."""

    failure_class: ClassVar[str] = "env.setup"


def parse_pipeline(name: str, stages: Sequence[str], *, mode: str = "write") -> Pipeline:
    """The pipeline of `KIND:ROLE` stages; in read mode a code stage answers instead of patching.

    Raises:
        PipelineError: a stage not of that form, an unknown kind, or stages in an impossible order.
    """
    try:
        parsed = [parse_stage(text) for text in stages]
    except ValueError as exc:
        raise PipelineError(f"pipeline {name!r}: {exc}") from None
    problems = pipeline_problems(parsed)
    if problems:
        raise PipelineError(f"pipeline {name!r}: " + "; ".join(problems))
    return Pipeline(name, tuple(_stage(kind, role, mode) for kind, role in parsed))


def _stage(kind: str, role: str, mode: str) -> Stage:
    status = KINDS[kind].status
    if kind == "code" and mode == "read":
        status = "answering"
    return Stage(kind, role, status)


def stages_of(pipeline: Pipeline) -> list[str]:
    """`KIND:ROLE` of each stage, as a configuration names them."""
    return [f"{stage.kind}:{stage.role}" for stage in pipeline.stages]


def choice_of(pipeline: Pipeline) -> PipelineChoice:
    return PipelineChoice(name=pipeline.name, stages=stages_of(pipeline))


def pipeline_for(task: TaskSubmitted) -> Pipeline:
    """The task's own pipeline when it was submitted with one; else the standard pipeline:
    diagnose without a model, explain in read mode, else fix.

    Raises:
        PipelineError: the submitted pipeline cannot run (the orchestrator rejects the task).
    """
    if task.pipeline is not None:
        return parse_pipeline(task.pipeline.name, task.pipeline.stages, mode=task.mode)
    if not task.models.any:
        return DIAGNOSE
    return EXPLAIN if task.mode == "read" else FIX


def roles_of(*pipelines: Pipeline) -> list[str]:
    seen: list[str] = []
    for pipeline in pipelines:
        for stage in pipeline.stages:
            if stage.role not in seen:
                seen.append(stage.role)
    return seen
