"""What a stage kind is: one object holding everything the orchestrator knows about a kind.

A `StageKind` names the request a stage of the kind is sent and the result it answers with, the
status the task shows meanwhile (the kind's own name: statuses are open to kinds, see
`agents.messages.status`), the order rules a pipeline is checked against, how the request is built
from the task's record (`build`), how the result changes it (`react`) and what the kind tells of
an ended task (`account`). What a kind means lives in its module: the machine, the status
listings and a continuation's account name no kind. The reaction is data — go on (`Advance`), go
back to an earlier stage (`Revisit`) or end the task (`End`) — and the state machine
(`agents/orchestrator/machine.py`) carries it out, so a kind never enters a stage, checks a budget
or writes a result itself.

`At` is what a kind may know of where its stage stands in the task's pipeline. The helpers below
are what several kinds build their requests from.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agents.feedback import revision_feedback
from agents.messages import EndStatus, StepBudget, TaskState, TaskStatus
from agents.orchestrator.io import Emit
from bus.messages import Message


@dataclass(frozen=True)
class At:
    """Where a stage stands: its place in the task's pipeline, its role and its step."""

    index: int
    """The stage's position in the pipeline."""
    role: str
    """The role whose workers do the stage."""
    step_id: str
    """The step: the one a request is built for, or the one a result answers."""
    kinds: tuple[str, ...]
    """The kind of every stage of the pipeline, in order."""

    def index_of(self, kind: str) -> int | None:
        """The position of the pipeline's first stage of `kind`; None when it has none."""
        return self.kinds.index(kind) if kind in self.kinds else None


@dataclass(frozen=True)
class Advance:
    """Go on to the stage after this one (after the last, the task is done)."""

    state: TaskState
    events: tuple[Emit, ...] = ()


@dataclass(frozen=True)
class Revisit:
    """Go back to the stage at `index`: a revision (the coder again) or a new plan."""

    state: TaskState
    index: int
    events: tuple[Emit, ...] = ()


@dataclass(frozen=True)
class End:
    """End the task with `status`; `report` says why, for people."""

    state: TaskState
    status: EndStatus
    failure_class: str | None
    report: str
    events: tuple[Emit, ...] = ()


Reaction = Advance | Revisit | End


@dataclass(frozen=True, kw_only=True)
class StageKind:
    """A stage kind: its messages, its place in a pipeline, its request and its reaction."""

    name: str
    """What pipelines call it: the `KIND` of `KIND:ROLE`."""
    request: type[Message]
    """What a role of this kind is sent."""
    result: type[Message]
    """What it answers (or a `step_failed`)."""
    status: TaskStatus
    """The task's status while a stage of this kind runs: the kind's own name for it (`planning`,
    `reviewing`, ...; several kinds may share one), never one of the machine's
    (`agents.messages.status.RESERVED_STATUSES`)."""
    phase: int
    """Stages stand in non-decreasing phase order: planning before retrieval before coding before
    review and verification (which may interleave)."""
    build: Callable[[TaskState, At], Message]
    """The request for a stage of this kind, from the task's record."""
    react: Callable[[TaskState, Any, At], Reaction]
    """How the task moves on from the stage's result (of type `result`)."""
    once: bool = False
    """At most one stage of this kind in a pipeline (revisions go back to it)."""
    after: tuple[str, ...] = ()
    """Kinds of which one must stand before a stage of this kind (review needs something to review)."""
    event: str | None = None
    """The name of the event the stage's result is told in; it names the role and the step."""
    model_budgets: bool = False
    """Its role runs a model: the task's step, token and cost budgets are checked before it."""
    read_status: TaskStatus | None = None
    """The task's status while it runs in a read-mode task, when not `status`."""
    account: Callable[[TaskState], list[str]] | None = None
    """Lines about what stages of this kind did, for the account of an ended task that a
    continuation carries (`agents.continuing.account_of`); None says nothing."""
    description: str = ""
    before: Callable[[TaskState, At], Revisit | None] | None = None
    """Asked each time the task is about to enter a stage of this kind: a `Revisit` sends it to
    an earlier stage instead (the `select` kind gathers its attempts so); None enters the stage."""

    @property
    def statuses(self) -> tuple[str, ...]:
        """The status names the kind declares: what a task shows while a stage of it runs."""
        return tuple(dict.fromkeys(s for s in (self.status, self.read_status) if s))


def deadline_of(state: TaskState) -> datetime:
    """The task's wall-clock deadline: its creation plus `budgets.deadline_s`."""
    return state.created_at + timedelta(seconds=state.task.budgets.deadline_s)


def step_budget(state: TaskState) -> StepBudget:
    """What the next step may still spend: the task's budgets minus what its steps used."""
    budgets = state.task.budgets
    cost_left = None
    if budgets.max_cost_usd is not None:
        cost_left = max(0.0, budgets.max_cost_usd - (state.usage.cost_usd or 0.0))
    tokens_left = max(0, budgets.max_tokens - state.usage.tokens)
    quota = state.quota
    if quota is not None:  # the principal's daily quota bounds the step as a budget does
        if quota.tokens_per_day is not None:
            tokens_left = min(
                tokens_left, max(0, quota.tokens_per_day - quota.others_tokens - state.usage.tokens)
            )
        if quota.cost_per_day_usd is not None:
            spent = quota.others_cost_usd + (state.usage.cost_usd or 0.0)
            quota_cost = max(0.0, quota.cost_per_day_usd - spent)
            cost_left = quota_cost if cost_left is None else min(cost_left, quota_cost)
    return StepBudget(
        requests=max(0, budgets.max_steps - state.usage.requests),
        tokens=tokens_left,
        deadline_at=deadline_of(state),
        cost_usd=cost_left,
        max_tool_failures=budgets.max_tool_failures,
        max_repeated_calls=budgets.max_repeated_calls,
    )


def model_limit(state: TaskState) -> str | None:
    """The model budget (a `budget.*` class) the task has used up, or None: checked before every
    step of a role that runs a model."""
    budgets = state.task.budgets
    if state.usage.requests >= budgets.max_steps:
        return "budget.steps"
    if state.usage.tokens >= budgets.max_tokens:
        return "budget.tokens"
    if budgets.max_cost_usd is not None and (state.usage.cost_usd or 0.0) >= budgets.max_cost_usd:
        return "budget.cost"
    return None


def gathering_attempts(state: TaskState, at: At) -> bool:
    """The task is still making its attempts: it asks for several, a `select` stage stands after
    this one, and nothing was chosen yet. Meanwhile a failed verdict is a candidate's verdict, not
    a reason to revise."""
    select = at.index_of("select")
    return (
        state.task.budgets.attempts > 1
        and select is not None
        and select > at.index
        and state.selection is None
    )


def verifier_feedback(state: TaskState) -> str | None:
    """The verifier's failures for the coder (or planner): failing test ids and places first."""
    report = state.last_report
    if report is None or not report.failures:
        return None
    return revision_feedback(report)
