"""Which roles a task passes through, in which order: data, not code.

A `Pipeline` is a tuple of `Stage`s; the orchestrator's transition function walks it. Each stage
holds its *kind* (what the orchestrator sends and how it reads the answer: `plan`, `retrieve`,
`code`, `review`, `verify`, `select`, `echo` or a plug-in's; see `agents/orchestrator/stages/`),
the *role* whose workers do it (so a different coder, or a security reviewer, is one
`review:security-reviewer` away), and the status the task shows meanwhile (the one its kind
declares). `pipeline_for` picks a task's pipeline: the one it was submitted with
(`TaskSubmitted.pipeline`, `KIND:ROLE` stages from the configuration's `[pipelines]`), else the
standard one for its mode. `parse_pipeline` checks a pipeline's stages against the kinds' order
rules before a task is accepted.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from agents.errors import AgentError
from agents.messages import PipelineChoice, TaskStatus, TaskSubmitted
from agents.orchestrator.stages import installed_kinds
from agents.orchestrator.stages.code import CODE as CODE_KIND
from agents.orchestrator.stages.echo import ECHO as ECHO_KIND
from agents.orchestrator.stages.kind import StageKind
from agents.orchestrator.stages.plan import PLAN as PLAN_KIND
from agents.orchestrator.stages.retrieve import RETRIEVE as RETRIEVE_KIND
from agents.orchestrator.stages.select import SELECT as SELECT_KIND
from agents.orchestrator.stages.verify import VERIFY as VERIFY_KIND


@dataclass(frozen=True)
class Stage:
    """One `KIND:ROLE` of a pipeline, with the status the task shows while it runs."""

    definition: StageKind
    role: str
    status: TaskStatus

    @classmethod
    def of(cls, kind: StageKind, role: str, mode: str = "write") -> "Stage":
        """A stage of `kind` done by `role`, showing the status its kind declares for `mode`."""
        status = kind.read_status if mode == "read" and kind.read_status else kind.status
        return cls(kind, role, status)

    @property
    def kind(self) -> str:
        return self.definition.name


@dataclass(frozen=True)
class Pipeline:
    name: str
    stages: tuple[Stage, ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(stage.kind for stage in self.stages)

    def index(self, kind: str) -> int | None:
        for i, stage in enumerate(self.stages):
            if stage.kind == kind:
                return i
        return None

    def stage(self, kind: str) -> Stage | None:
        i = self.index(kind)
        return None if i is None else self.stages[i]


PLAN = Stage.of(PLAN_KIND, "planner")
RETRIEVE = Stage.of(RETRIEVE_KIND, "retriever")
CODE = Stage.of(CODE_KIND, "coder")
ANSWER = Stage.of(CODE_KIND, "coder", "read")
VERIFY = Stage.of(VERIFY_KIND, "verifier")
SELECT = Stage.of(SELECT_KIND, "selector")

FIX = Pipeline("fix", (PLAN, RETRIEVE, CODE, VERIFY))
"""write and execute mode: plan, retrieve, code, verify (and revise)."""
EXPLAIN = Pipeline("explain", (PLAN, RETRIEVE, ANSWER, VERIFY))
"""read mode: the coder answers instead of patching; the verifier checks what the answer cites."""
DIAGNOSE = Pipeline("diagnose", (PLAN, RETRIEVE, VERIFY))
"""No model configured: a fixed plan, real retrieval, verification of the unmodified tree."""
ECHO = Pipeline("echo", (Stage.of(ECHO_KIND, "echo"),))
"""The bus's smoke pipeline: one hop through the `echo` role."""

NAMED: dict[str, Pipeline] = {p.name: p for p in (FIX, EXPLAIN, DIAGNOSE, ECHO)}


class PipelineError(AgentError, ValueError):
    """A pipeline that cannot run: the message says which stage and why."""

    failure_class: ClassVar[str] = "env.setup"


def parse_stage(text: str, kinds: Mapping[str, StageKind] | None = None) -> tuple[str, str]:
    """`KIND:ROLE` as (kind, role); `kinds` are the known kinds (default: the installed ones).

    Raises:
        ValueError: not of that form, or an unknown kind.
    """
    kinds = installed_kinds() if kinds is None else kinds
    kind, sep, role = text.strip().partition(":")
    if not sep or not kind or not role:
        raise ValueError(f"stage {text!r} is not KIND:ROLE (e.g. review:security-reviewer)")
    if kind not in kinds:
        raise ValueError(f"stage {text!r}: unknown stage kind {kind!r}; known kinds: {', '.join(kinds)}")
    return kind, role


def pipeline_problems(
    stages: Sequence[tuple[str, str]], kinds: Mapping[str, StageKind] | None = None
) -> list[str]:
    """What makes a pipeline of (kind, role) stages impossible to run; empty when it can run."""
    kinds = installed_kinds() if kinds is None else kinds
    if not stages:
        return ["a pipeline needs at least one stage"]
    problems: list[str] = []
    seen: list[str] = []
    for i, (kind_name, role) in enumerate(stages, 1):
        kind = kinds.get(kind_name)
        if kind is None:
            problems.append(
                f"stage {i} ({kind_name}:{role}): unknown stage kind; known kinds: {', '.join(kinds)}"
            )
            continue
        if kind.once and kind_name in seen:
            problems.append(f"stage {i} ({kind_name}:{role}): a pipeline has at most one {kind_name} stage")
        if kind.after and not any(k in seen for k in kind.after):
            problems.append(
                f"stage {i} ({kind_name}:{role}) must come after a {' or '.join(kind.after)} stage"
            )
        later = [k for k in seen if k in kinds and kinds[k].phase > kind.phase]
        if later:
            problems.append(f"stage {i} ({kind_name}:{role}) cannot come after a {later[0]} stage")
        seen.append(kind_name)
    return problems


def parse_pipeline(
    name: str, stages: Sequence[str], *, mode: str = "write", kinds: Mapping[str, StageKind] | None = None
) -> Pipeline:
    """The pipeline of `KIND:ROLE` stages; in read mode a code stage answers instead of patching.
    `kinds` are the known kinds (default: the installed ones).

    Raises:
        PipelineError: a stage not of that form, an unknown kind, or stages in an impossible order.
    """
    kinds = installed_kinds() if kinds is None else kinds
    try:
        parsed = [parse_stage(text, kinds) for text in stages]
    except ValueError as exc:
        raise PipelineError(f"pipeline {name!r}: {exc}") from None
    problems = pipeline_problems(parsed, kinds)
    if problems:
        raise PipelineError(f"pipeline {name!r}: " + "; ".join(problems))
    return Pipeline(name, tuple(Stage.of(kinds[kind], role, mode) for kind, role in parsed))


def stages_of(pipeline: Pipeline) -> list[str]:
    """`KIND:ROLE` of each stage, as a configuration names them."""
    return [f"{stage.kind}:{stage.role}" for stage in pipeline.stages]


def choice_of(pipeline: Pipeline) -> PipelineChoice:
    return PipelineChoice(name=pipeline.name, stages=stages_of(pipeline))


def pipeline_for(task: TaskSubmitted) -> Pipeline:
    """The task's own pipeline when it was submitted with one; else the standard pipeline:
    diagnose without a model, explain in read mode, else fix. A task asking for several attempts
    (`budgets.attempts`) gets a select stage at the end when its pipeline has none.

    Raises:
        PipelineError: the submitted pipeline cannot run (the orchestrator rejects the task).
    """
    if task.pipeline is not None:
        pipeline = parse_pipeline(task.pipeline.name, task.pipeline.stages, mode=task.mode)
    elif not task.models.any:
        pipeline = DIAGNOSE
    else:
        pipeline = EXPLAIN if task.mode == "read" else FIX
    return with_selection(pipeline, task)


def with_selection(pipeline: Pipeline, task: TaskSubmitted) -> Pipeline:
    """`pipeline` ending with the built-in select stage when the task asks for several attempts
    of a patch and the pipeline codes but chooses nothing itself; else `pipeline` unchanged."""
    wanted = task.budgets.attempts > 1 and task.mode != "read"
    if not wanted or pipeline.index("code") is None or pipeline.index("select") is not None:
        return pipeline
    return Pipeline(pipeline.name, (*pipeline.stages, SELECT))
