"""The messages of one step: what the orchestrator sends a role, and what the role answers.

Every request is a `StepRequest`: it names its step (`step_id`) and carries the whole task, so a
role needs nothing but the message (and the bus's object store for the repository snapshot) and
any worker anywhere can take it. Every result is a `StepResult` answering one step; the record
expects one step at a time, so a late or duplicate result of a superseded step is recognised and
ignored. A role that cannot do its step answers `StepFailed`. Which request and result belong to
which stage kind is the kinds' business (`agents.orchestrator.stages`).
"""

from datetime import datetime
from typing import Literal

from pydantic import Field

from agents.messages.plan import Plan
from agents.messages.task import Approval, Finding, TaskSubmitted, Usage
from agents.messages.verification import Baseline, VerificationReport
from bus.messages import Message


class StepRequest(Message):
    """Work for a role: one step of a task, named by the orchestrator."""

    kind: str
    """The request's kind; each request model fixes it to its own literal."""
    step_id: str
    """The step this message belongs to, named by the orchestrator (`<seq>-<stage>`, e.g.
    `03-code`); a result whose step is not the one the task waits for is ignored."""
    task: TaskSubmitted
    """The whole task as submitted, so the role needs nothing but this message."""


class StepResult(Message):
    """A role's answer to one `StepRequest`."""

    kind: str
    """The result's kind; each result model fixes it to its own literal."""
    step_id: str
    """The `step_id` of the request this answers, copied unchanged."""


class StepBudget(Message):
    """What one step may still spend: the task's budgets minus what earlier steps used."""

    requests: int = Field(ge=0)
    """Model requests left (`budgets.max_steps` minus the requests of earlier steps)."""
    tokens: int = Field(ge=0)
    """Model tokens left, input and output together."""
    deadline_at: datetime
    """The task's wall-clock deadline (UTC): submission plus `budgets.deadline_s`."""
    cost_usd: float | None = None
    """US dollars left to spend; None when the task has no spend limit."""
    max_tool_failures: int = 3
    """The task's `budgets.max_tool_failures`, passed on unchanged."""
    max_repeated_calls: int = 3
    """The task's `budgets.max_repeated_calls`, passed on unchanged."""


class PlanRequest(StepRequest):
    """Work for the planner: make a plan for the task, or revise `previous` in the light of `feedback`."""

    kind: Literal["plan_request"] = "plan_request"
    """Always `plan_request`; equals the envelope's `kind`."""
    budget: StepBudget
    """What the step may still spend of the task's budgets."""
    previous: Plan | None = None
    """The plan being replaced, when this is a revision; None for the first plan."""
    feedback: str | None = None
    """Why the previous attempt failed, when this is a revision."""


class PlanResult(StepResult):
    """The planner's answer to a `PlanRequest`."""

    kind: Literal["plan_result"] = "plan_result"
    """Always `plan_result`; equals the envelope's `kind`."""
    plan: Plan
    """The new plan; it replaces the task's current one."""
    usage: Usage = Usage()
    """What this step consumed; the orchestrator adds it to the task's and the role's totals."""


class RankedFile(Message):
    """A file the retriever found relevant to the task."""

    path: str
    """Relative to the repository root."""
    score: float = 0.0
    """Falls along the retriever's order: the search server's file ranking of the task text, then
    files only the hypotheses, named symbols or plan found. Only the order matters; higher is better."""
    why: str = ""
    """What brought it in: a search hit, a symbol the task names, the plan."""


class Snippet(Message):
    """A piece of a file packed into the coder's context."""

    path: str
    """Relative to the repository root."""
    start_line: int
    """First line of `text` in the file, 1-based."""
    end_line: int
    """Last line of `text` in the file, 1-based, inclusive."""
    symbols: list[str] = []
    """Qualified names of the definitions the snippet covers (`Class.method`), when known."""
    text: str
    """The lines themselves, whole lines only."""
    truncated: bool = False
    """True when only the snippet's leading lines fitted the token budget."""


class ContextRequest(StepRequest):
    """Work for the retriever: find and pack the code the task and its plan are about."""

    kind: Literal["context_request"] = "context_request"
    """Always `context_request`; equals the envelope's `kind`."""
    plan: Plan
    """The task's current plan."""
    token_budget: int = Field(default=6000, ge=200)
    """Estimated tokens (about 4 characters each) the packed context may take, repository map included."""


class Context(StepResult):
    """What the retriever packed for the coder: ranked files, snippets and a map within a budget."""

    kind: Literal["context"] = "context"
    """Always `context`; equals the envelope's `kind`."""
    files: list[RankedFile] = []
    """Best first, at most 30."""
    snippets: list[Snippet] = []
    """Search hits packed into the budget, best-ranked files first; overlapping snippets of one
    file are merged."""
    repo_map: str = ""
    """Outline of the repository (files and their definitions' signatures); empty when unavailable."""
    raised: list[str] = []
    """Execute mode: what the task's example code raised inside the repository when the retriever
    ran it in the sandbox, one line per error (its type, where, the repository callers), so the
    coder starts where the reported error happens; empty when nothing raised or nothing ran."""
    tokens: int = 0
    """Estimated tokens (about 4 characters each) of the packed context: the task text, `snippets`
    and `repo_map`."""
    usage: Usage = Usage()
    """What the step consumed; all zeros from the built-in retriever, which uses no model."""


class CodeRequest(StepRequest):
    """Work for the coder: carry out the plan in a scratch workspace (or answer, in read mode)."""

    kind: Literal["code_request"] = "code_request"
    """Always `code_request`; equals the envelope's `kind`."""
    plan: Plan
    """The task's current plan."""
    context: Context
    """What the retriever packed for this task."""
    budget: StepBudget
    """What the step may still spend of the task's budgets."""
    previous_patch: str | None = None
    """The last attempt's patch, which the workspace starts from when revising."""
    feedback: str | None = None
    """The verifier's failures in a compact form, when revising."""
    attempt: int = Field(default=1, ge=1)
    """Which of the task's `budgets.attempts` this run is (each starts from the starting tree)."""


class CodeResult(StepResult):
    """The coder's answer to a `CodeRequest`: a patch, an answer, or why it stopped."""

    kind: Literal["code_result"] = "code_result"
    """Always `code_result`; equals the envelope's `kind`."""
    patch: str | None = None
    """Unified diff (a/ b/ prefixes) of the scratch workspace against the snapshot."""
    files_changed: list[str] = []
    """Repository-relative paths the patch touches."""
    answer: str | None = None
    """Read mode: the explanation; other modes: the coder's summary of what it did."""
    stopped_by: str | None = None
    """The failure class that ended the run early (budget.steps, agent.loop, ...), None when the
    model finished."""
    message: str = ""
    """Why the run stopped early, for people; empty when the model finished."""
    usage: Usage = Usage()
    """What this step consumed; the orchestrator adds it to the task's and the role's totals."""
    tool_failures: int = 0
    """Consecutive failed tool calls at the end of the run."""
    approvals: list[Approval] = []
    """Paths the patch changes because a person approved the high-risk call that changed them."""


class VerifyRequest(StepRequest):
    """Work for the verifier: judge a patch (or a read-mode answer) against the task's tree."""

    kind: Literal["verify_request"] = "verify_request"
    """Always `verify_request`; equals the envelope's `kind`."""
    plan: Plan
    """The task's current plan; its `test_targets` and `files_of_interest` guide which tests run."""
    patch: str | None = None
    """Unified diff to apply to the snapshot; None with no answer either: diagnose mode, judge the
    unmodified tree."""
    answer: str | None = None
    """Read mode: the coder's answer to check against the code; None in other modes."""
    baseline: Baseline | None = None
    """The starting tree's state, when an earlier verification of this task computed it."""
    deadline_at: datetime
    """The task's wall-clock deadline (UTC): verification still running then is cut off and reported
    as not finished."""
    raised_before: list[str] = []
    """Execute mode: what the task's example code raised in the repository on the starting tree
    (the retriever's `Context.raised`), for the record: the verifier runs the example itself on the
    starting tree and with the patch (`agents.roles.verifier.example`)."""
    approved_paths: list[str] = []
    """Protected paths a person approved changing (the record's `approvals`): the patch's changes
    there are judged on their merits, not failed as `patch.protected_path`."""


class VerifyResult(StepResult):
    """The verifier's answer to a `VerifyRequest`."""

    kind: Literal["verify_result"] = "verify_result"
    """Always `verify_result`; equals the envelope's `kind`."""
    report: VerificationReport
    """The verdict and what it rests on."""
    baseline: Baseline | None = None
    """The starting tree's state as now known, for the next verification of this task; None when
    none was computed."""
    usage: Usage = Usage()
    """What this step consumed; the orchestrator adds it to the task's and the role's totals."""


class ReviewRequest(StepRequest):
    """Work for a review role: judge the patch so far (a `review` stage of the pipeline)."""

    kind: Literal["review_request"] = "review_request"
    """Always `review_request`; equals the envelope's `kind`."""
    step_id: str
    """The step this message belongs to, named by the orchestrator (`<seq>-review`); a result
    whose step is not the one the task waits for is ignored."""
    plan: Plan
    """The task's current plan."""
    context: Context
    """What the retriever packed for this task (empty when the pipeline has no retrieve stage)."""
    patch: str | None = None
    """The coder's latest patch (unified diff, a/ b/ prefixes); None when it changed nothing."""
    files_changed: list[str] = []
    """Repository-relative paths the patch touches."""
    answer: str | None = None
    """The coder's answer or summary."""
    report: VerificationReport | None = None
    """The latest verification report, when a verify stage ran before this review; else None."""
    round: int = Field(default=1, ge=1)
    """1 for this stage's first review of the task, 2 after one revision, ..."""
    budget: StepBudget
    """What the step may still spend of the task's budgets."""


class ReviewResult(StepResult):
    """A review role's answer: approve, request changes (a revision) or reject (the task fails)."""

    kind: Literal["review_result"] = "review_result"
    """Always `review_result`; equals the envelope's `kind`."""
    verdict: Literal["approve", "request_changes", "reject"]
    """approve: go on; request_changes: the coder revises with `feedback` (counted against
    `budgets.max_revisions`); reject: the task fails with class `review.rejected`."""
    findings: list[Finding] = []
    """What the review found; shown in the result and, with `feedback`, to the coder."""
    feedback: str = ""
    """What the coder should change, in words; required in substance for `request_changes`."""
    usage: Usage = Usage()
    """What this step consumed; the orchestrator adds it to the task's and the role's totals."""


class StepFailed(Message):
    """A role could not do its step; the class says whose fault (see `agents/failures.py`)."""

    kind: Literal["step_failed"] = "step_failed"
    """Always `step_failed`; equals the envelope's `kind`."""
    step_id: str
    """The `step_id` of the request that failed; empty when the request named none."""
    role: str
    """The role that failed: `planner`, `retriever`, `coder`, `verifier` or a custom role's name."""
    failure_class: str
    """A dotted `FailureClass` value, e.g. `env.infra`; the task ends on it, handed off to a person
    for a `budget.*` class and failed otherwise."""
    message: str
    """What went wrong, for people; never a secret."""
    usage: Usage = Usage()
    """What the step consumed before it failed; charged to the task like a result's."""
