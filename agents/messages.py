"""The payloads of a task's path, registered with the bus at import.

A task travels as messages between the orchestrator and the roles (see `agents/orchestrator/`):

    client ─ TaskSubmitted ─► orchestrator ─ PlanRequest ──► planner   ─ PlanResult ──► orchestrator
                                           ─ ContextRequest ► retriever ─ Context ─────►
                                           ─ CodeRequest ──► coder     ─ CodeResult ──►
                                           ─ VerifyRequest ► verifier  ─ VerifyResult ►
                                           (any role)                  ─ StepFailed ──►
    orchestrator ─ TaskResult ─► codeloop.events.<task_id>.result

Every request names the step it belongs to (`step_id`); the orchestrator's record expects one
step at a time, so a late or duplicate result of a superseded step is recognised and ignored.
Requests carry the whole task and the budget the step may still spend, so a role needs nothing
but the message (and the bus's object store for the repository snapshot): any worker anywhere can
take it. Models are closed and frozen like every bus payload (`bus.messages.Message`).
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from agents.verifier.report import Baseline, Failure, VerificationReport
from agents.workspace.snapshot import SnapshotRef
from bus.messages import Message, register_payloads

Mode = Literal["read", "write", "execute"]
TaskStatus = Literal[
    "submitted",
    "planning",
    "retrieving",
    "coding",
    "answering",
    "verifying",
    "revising",
    "done",
    "diagnosed",
    "handed_off",
    "failed",
    "cancelled",
    "rejected",
]
TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"done", "diagnosed", "handed_off", "failed", "cancelled", "rejected"}
)
MAX_TASK_TEXT = 96 * 1024
"""Characters of task text a submission may carry; the record and every request hold it, and a
NATS message is capped at 1 MiB by default."""


class Budgets(Message):
    """Limits that end every loop; a task ended by one is handed to a person with a report."""

    max_steps: int = Field(default=30, ge=1)
    """Model requests, all roles together."""
    max_revisions: int = Field(default=3, ge=0)
    """Times the verifier may send a patch back for revision."""
    max_tool_failures: int = Field(default=3, ge=1)
    """Consecutive failed tool calls after which the coder stops."""
    max_repeated_calls: int = Field(default=3, ge=2)
    """The same tool call with the same arguments this many times in a row is a loop."""
    deadline_s: float = Field(default=1800.0, gt=0)
    """Wall-clock limit of the whole task, from submission."""
    max_tokens: int = Field(default=400_000, ge=1)
    """Model tokens, input and output, all roles together."""
    max_cost_usd: float | None = Field(default=None, gt=0)
    """Spend limit where the model's prices are known; None for no limit."""


class ModelNames(Message):
    """Which model each LLM role uses: pydantic-ai names or `function:PATH.py:NAME`."""

    default: str | None = None
    """Every LLM role's model unless overridden; None everywhere means diagnose mode."""
    planner: str | None = None
    coder: str | None = None

    def for_role(self, role: str) -> str | None:
        return getattr(self, role, None) or self.default

    @property
    def any(self) -> bool:
        return bool(self.default or self.planner or self.coder)


class TaskSubmitted(Message):
    """A client asks for a task; published on `codeloop.task.submit`, deduplicated by envelope id."""

    kind: Literal["task_submitted"] = "task_submitted"
    text: str = Field(min_length=1, max_length=MAX_TASK_TEXT)
    """What the user wants, in their words."""
    repo: str = Field(min_length=1, max_length=4096)
    """Absolute path of the repository on the submitting machine (a hint; the snapshot is the truth)."""
    mode: Mode = "read"
    """read: answer only; write: may propose a patch; execute: may also run code in the sandbox."""
    budgets: Budgets = Budgets()
    models: ModelNames = ModelNames()
    snapshot: SnapshotRef | None = None
    """The working tree captured at submission; workers materialise scratch workspaces from it."""
    interactive: bool = False
    """A person is at a terminal answering confirmations (`codeloop run`)."""
    confirm_timeout_s: float = Field(default=300.0, gt=0)
    """How long a high-risk tool call waits for a person's answer before it is refused."""


class Usage(Message):
    """What a task, a role or one step consumed."""

    requests: int = 0
    """Model requests."""
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    cost_usd: float | None = None
    """None while no price is known."""
    wall_s: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def plus(self, other: "Usage") -> "Usage":
        cost = None if self.cost_usd is None and other.cost_usd is None else (
            (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        )
        return Usage(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            tool_calls=self.tool_calls + other.tool_calls,
            cost_usd=cost,
            wall_s=round(self.wall_s + other.wall_s, 3),
        )


class StepBudget(Message):
    """What one step may still spend: the task's budgets minus what earlier steps used."""

    requests: int = Field(ge=0)
    tokens: int = Field(ge=0)
    deadline_at: datetime
    """The task's wall-clock deadline."""
    cost_usd: float | None = None
    max_tool_failures: int = 3
    max_repeated_calls: int = 3


class PlanStep(Message):
    description: str
    files: list[str] = []
    """Repository-relative paths this step expects to touch or read."""


class Plan(Message):
    """The planner's structured plan; a revision says why it replaces the one before."""

    steps: list[PlanStep] = []
    hypotheses: list[str] = []
    """Guesses about the cause to check, e.g. "the off-by-one is in `paginate`"."""
    files_of_interest: list[str] = []
    test_targets: list[str] = []
    """Test files or node ids that should show the task is done."""
    done_criteria: list[str] = []
    revision_reason: str | None = None
    """Why this plan replaces the previous one; None for the first plan."""
    fixed: bool = False
    """True for the plan diagnose mode uses when no model is configured."""


class PlanRequest(Message):
    kind: Literal["plan_request"] = "plan_request"
    step_id: str
    task: TaskSubmitted
    budget: StepBudget
    previous: Plan | None = None
    feedback: str | None = None
    """Why the previous attempt failed, when this is a revision."""


class PlanResult(Message):
    kind: Literal["plan_result"] = "plan_result"
    step_id: str
    plan: Plan
    usage: Usage = Usage()


class RankedFile(Message):
    path: str
    score: float = 0.0
    why: str = ""
    """What brought it in: a search hit, a symbol the task names, the plan."""


class Snippet(Message):
    path: str
    start_line: int
    end_line: int
    symbols: list[str] = []
    text: str
    truncated: bool = False


class ContextRequest(Message):
    kind: Literal["context_request"] = "context_request"
    step_id: str
    task: TaskSubmitted
    plan: Plan
    token_budget: int = Field(default=6000, ge=200)


class Context(Message):
    """What the retriever packed for the coder: ranked files, snippets and a map within a budget."""

    kind: Literal["context"] = "context"
    step_id: str
    files: list[RankedFile] = []
    """Best first."""
    snippets: list[Snippet] = []
    repo_map: str = ""
    tokens: int = 0
    usage: Usage = Usage()


class CodeRequest(Message):
    kind: Literal["code_request"] = "code_request"
    step_id: str
    task: TaskSubmitted
    plan: Plan
    context: Context
    budget: StepBudget
    previous_patch: str | None = None
    """The last attempt's patch, which the workspace starts from when revising."""
    feedback: str | None = None
    """The verifier's failures in a compact form, when revising."""


class CodeResult(Message):
    kind: Literal["code_result"] = "code_result"
    step_id: str
    patch: str | None = None
    """Unified diff (a/ b/ prefixes) of the scratch workspace against the snapshot."""
    files_changed: list[str] = []
    answer: str | None = None
    """Read mode: the explanation; other modes: the coder's summary of what it did."""
    stopped_by: str | None = None
    """The failure class that ended the run early (budget.steps, agent.loop, ...), None when the
    model finished."""
    message: str = ""
    usage: Usage = Usage()
    tool_failures: int = 0
    """Consecutive failed tool calls at the end of the run."""


class VerifyRequest(Message):
    kind: Literal["verify_request"] = "verify_request"
    step_id: str
    task: TaskSubmitted
    plan: Plan
    patch: str | None = None
    """None with no answer either: diagnose mode, judge the unmodified tree."""
    answer: str | None = None
    baseline: Baseline | None = None
    """The starting tree's state, when an earlier verification of this task computed it."""
    deadline_at: datetime


class VerifyResult(Message):
    kind: Literal["verify_result"] = "verify_result"
    step_id: str
    report: VerificationReport
    baseline: Baseline | None = None
    usage: Usage = Usage()


class StepFailed(Message):
    """A role could not do its step; the class says whose fault (see `agents/failures.py`)."""

    kind: Literal["step_failed"] = "step_failed"
    step_id: str
    role: str
    failure_class: str
    message: str
    usage: Usage = Usage()


class CancelTask(Message):
    """Ask the orchestrator to stop a task; published on `codeloop.task.cancel`."""

    kind: Literal["cancel_task"] = "cancel_task"
    reason: str = "cancelled by the user"


class Verification(Message):
    """The verifier's verdict as the result object shows it."""

    verdict: Literal["passed", "failed", "unverified"] | None = None
    checks: list[dict[str, Any]] = []
    failures: list[Failure] = []


class TaskResult(Message):
    """How a task ended; the object `codeloop run --json` prints and `status --json` shows."""

    kind: Literal["task_result"] = "task_result"
    task_id: str
    status: TaskStatus
    mode: Mode
    answer: str | None = None
    patch: str | None = None
    """Unified diff against the submitted tree (`patch_ref` is reserved for a stored copy; not set today)."""
    patch_ref: str | None = None
    files_changed: list[str] = []
    plan: dict[str, Any] = {}
    """`steps`, `hypotheses`, ... of the last plan, with `revisions`: the earlier plans' reasons."""
    context: dict[str, Any] = {}
    """`files`: the retriever's files, best first."""
    verification: Verification = Verification()
    failure_class: str | None = None
    """Why the task did not finish as done; None when it did."""
    steps: int = 0
    """Model requests, all roles together."""
    revisions: int = 0
    usage: dict[str, Any] = {}
    """requests, input_tokens, output_tokens, tool_calls, wall_s, cost_usd, by_role."""
    report: str = ""
    """Human-readable summary, or the hand-off report."""
    trace_id: str | None = None


class PlanRevision(Message):
    plan: Plan
    reason: str
    at_step: int


class TaskState(Message):
    """The task record in the `codeloop-tasks` KV bucket; every transition is written here first."""

    kind: Literal["task_state"] = "task_state"
    task_id: str
    status: TaskStatus
    task: TaskSubmitted
    created_at: datetime
    updated_at: datetime
    trace_id: str | None = None
    stage: str | None = None
    """The pipeline stage in progress (`plan`, `retrieve`, `code`, `verify`, ...)."""
    expected_step: str | None = None
    """The step id whose result the task waits for; any other result is stale."""
    step_seq: int = 0
    """Steps dispatched so far; step ids are numbered from it."""
    steps_done: list[str] = []
    """Step ids whose results were applied, in order."""
    plan: Plan | None = None
    plan_history: list[PlanRevision] = []
    context: Context | None = None
    patch: str | None = None
    files_changed: list[str] = []
    answer: str | None = None
    baseline: Baseline | None = None
    last_report: VerificationReport | None = None
    failure_signatures: list[str] = []
    """One signature of each failed verification's failure set, to stop identical retries."""
    revisions: int = 0
    failed_revisions_since_plan: int = 0
    tool_failures: int = 0
    usage: Usage = Usage()
    by_role: dict[str, Usage] = {}
    outbox: list[dict[str, Any]] = []
    """What the last transition asked to publish (subject, kind, payload, label), so a redelivered
    message after a crash republishes the same messages under the same ids."""
    outbox_cause: str | None = None
    """Id of the message whose transition wrote the outbox."""
    outbox_request_id: str | None = None
    """Id of the work request in the outbox, which a result without a `step_id` points at."""
    result: TaskResult | None = None
    error: str | None = None


register_payloads(
    TaskSubmitted, PlanRequest, PlanResult, ContextRequest, Context, CodeRequest, CodeResult,
    VerifyRequest, VerifyResult, StepFailed, CancelTask, TaskResult, TaskState, VerificationReport,
)  # fmt: skip
