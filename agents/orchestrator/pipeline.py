"""Which roles a task passes through, in which order: data, not code.

A `Pipeline` is a tuple of `Stage`s; the orchestrator's transition function walks it. Each stage
names its *kind* (what the orchestrator sends and how it reads the answer: `plan`, `retrieve`,
`code`, `verify`, `echo`), the *role* whose workers do it (so a different coder, or a custom role
speaking the same messages, is one `Stage(kind="code", role="my-coder")` away), and the status
the task shows meanwhile. `pipeline_for` picks the standard pipeline for a task; `codeloop serve
--pipeline` and custom-role authors pass their own.
"""

from dataclasses import dataclass

from agents.messages import TaskStatus, TaskSubmitted

StageKind = str
KNOWN_KINDS = ("plan", "retrieve", "code", "verify", "echo")


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


def pipeline_for(task: TaskSubmitted) -> Pipeline:
    """The standard pipeline: diagnose without a model, explain in read mode, else fix."""
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
