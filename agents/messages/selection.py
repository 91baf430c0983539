"""Several candidates for one task, and the choice among them (`budgets.attempts` above 1).

The code stage runs once per attempt, each from the starting tree; the stages after it (reviews,
the verification) judge each attempt's patch, and each judged attempt is kept on the task's record
as an `Attempt`. A `select` stage is then sent every attempt (`SelectRequest`) and answers which
one the task goes on with and why (`SelectResult`); the record keeps that as its `Selection`.
"""

from typing import Literal

from pydantic import Field

from agents.messages.steps import Plan, StepBudget, StepRequest, StepResult
from agents.messages.task import MAX_ATTEMPTS, Approval, Usage
from agents.messages.verification import VerificationReport
from bus.messages import Message


class Attempt(Message):
    """One candidate: what one run of the code stage produced, and how it was judged."""

    attempt: int = Field(ge=1)
    """Its number: 1, 2, ... in the order the attempts were made (a revision of a chosen attempt
    is numbered after them)."""
    patch: str | None = None
    """Unified diff (a/ b/ prefixes) against the starting tree; None when it changed nothing."""
    files_changed: list[str] = []
    """Repository-relative paths the patch touches."""
    answer: str | None = None
    """The coder's summary of what it did."""
    report: VerificationReport | None = None
    """The verification of this patch; None when the pipeline has no verify stage."""
    approvals: list[Approval] = []
    """Protected paths a person approved this attempt changing."""
    revision_of: int | None = None
    """The attempt this one revises (the chosen one, sent back after its verification failed);
    None for an attempt made from the starting tree."""


class Selection(Message):
    """Which attempt a `select` stage chose, and why."""

    chosen: int
    """The chosen attempt's number."""
    reason: str
    """Why, in one line: which step of the ranking decided, and on what."""
    order: list[int] = []
    """Every attempt's number, best first (as the selector ranked them; may be empty)."""
    clusters: dict[int, int] = {}
    """Attempt number -> its behaviour cluster (1 is the largest); absent when unknown."""
    role: str = ""
    """The role that chose."""


class SelectRequest(StepRequest):
    """Work for a `select` stage: choose one of the task's attempts."""

    kind: Literal["select_request"] = "select_request"
    """Always `select_request`; equals the envelope's `kind`."""
    plan: Plan
    """The task's current plan."""
    candidates: list[Attempt] = Field(min_length=1, max_length=2 * MAX_ATTEMPTS)
    """Every attempt so far, in the order they were made, each with its verification."""
    budget: StepBudget | None = None
    """What the step may still spend of the task's budgets (a selector that asks a model keeps
    to it; the built-in one runs none). The task's model budgets are not checked before a select
    stage: a budget that stopped the attempts must still let the choice among them be made."""


class SelectResult(StepResult):
    """A `select` stage's answer: the attempt the task goes on with."""

    kind: Literal["select_result"] = "select_result"
    """Always `select_result`; equals the envelope's `kind`."""
    chosen: int
    """The chosen attempt's number (one of the request's `candidates`)."""
    reason: str = ""
    """Why this one, for people and the trace."""
    order: list[int] = []
    """Every attempt's number, best first; empty when the selector does not rank them."""
    clusters: dict[int, int] = {}
    """Attempt number -> behaviour cluster (1 the largest), where the selector clustered them."""
    usage: Usage = Usage()
    """What this step consumed; the orchestrator adds it to the task's and the role's totals."""
