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

from agents.messages.verification import Baseline, Failure, VerificationReport
from agents.workspace.snapshot import SnapshotRef
from bus.messages import Message, register_payloads

Mode = Literal["read", "write", "execute"]
TaskStatus = Literal[
    "submitted",
    "planning",
    "retrieving",
    "coding",
    "answering",
    "reviewing",
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


class ModelOptions(Message):
    """Settings of one model, wherever it is used (configuration: `[model_settings."NAME"]`)."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature; None: the provider's default."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Most tokens one response may have; None: the provider's default."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Deadline of one request attempt in seconds (a passed one is retried); None: the SDK's own."""
    max_attempts: int | None = Field(default=None, ge=1)
    """Attempts per request on infrastructure failures, the first included; None: 4. In a fallback
    list, 1 moves on to the next model at the first provider error."""
    input_usd_per_mtok: float | None = Field(default=None, ge=0)
    """Price of a million input tokens in US dollars, used where genai-prices does not know the model."""
    output_usd_per_mtok: float | None = Field(default=None, ge=0)
    """Price of a million output tokens in US dollars, used where genai-prices does not know the model."""

    @property
    def priced(self) -> bool:
        return self.input_usd_per_mtok is not None and self.output_usd_per_mtok is not None


class ModelChain(Message):
    """What one role runs: its model, the models tried in order after a provider error, their settings."""

    names: list[str] = Field(min_length=1)
    """The role's model first, then its fallbacks."""
    options: dict[str, ModelOptions] = {}
    """Model name -> its settings; a model without an entry takes the defaults."""

    @property
    def name(self) -> str:
        return self.names[0]


BUILTIN_MODEL_ROLES = ("default", "planner", "coder")


class ModelNames(Message):
    """Which model each LLM role uses: pydantic-ai names or `function:PATH.py:NAME`."""

    default: str | None = None
    """Every LLM role's model unless overridden; None everywhere means diagnose mode."""
    planner: str | None = None
    """The planner's model; None uses `default`."""
    coder: str | None = None
    """The coder's model; None uses `default`."""
    roles: dict[str, str] = {}
    """Models of other (plug-in) roles by role name; a role not named uses `default`."""
    fallbacks: dict[str, list[str]] = {}
    """Role name (or `default`) -> the models tried in order when that role's model fails with a
    provider error (unavailable after its retries, or refused)."""
    options: dict[str, ModelOptions] = {}
    """Model name -> its settings (temperature, max tokens, timeout, attempts, price)."""

    def for_role(self, role: str) -> str | None:
        own = getattr(self, role) if role in BUILTIN_MODEL_ROLES else self.roles.get(role)
        return own or self.default

    def chain_for(self, role: str) -> ModelChain | None:
        """The role's model with its fallbacks and their settings; None: no model (diagnose mode)."""
        name = self.for_role(role)
        if name is None:
            return None
        own = getattr(self, role) if role in BUILTIN_MODEL_ROLES else self.roles.get(role)
        names = [name, *self.fallbacks.get(role if own else "default", [])]
        return ModelChain(names=names, options={n: self.options[n] for n in names if n in self.options})

    def all_names(self) -> list[str]:
        """Every model name this choice mentions, once each, in a stable order."""
        found = [self.default, self.planner, self.coder, *self.roles.values()]
        found += [name for chain in self.fallbacks.values() for name in chain]
        return list(dict.fromkeys(name for name in found if name))

    @property
    def any(self) -> bool:
        return bool(self.default or self.planner or self.coder)


class PipelineChoice(Message):
    """A named pipeline as submitted: its stages, each `KIND:ROLE` (e.g. `review:security-reviewer`)."""

    name: str = Field(min_length=1, max_length=128)
    """The pipeline's name in the configuration (`[pipelines]`), or a built-in one's."""
    stages: list[str] = Field(min_length=1, max_length=32)
    """`KIND:ROLE` of each stage in order; kinds are `plan`, `retrieve`, `code`, `review`, `verify`
    (and `echo`)."""


class TaskSubmitted(Message):
    """A client asks for a task; published on `codeloop.task.submit`, deduplicated by envelope id."""

    kind: Literal["task_submitted"] = "task_submitted"
    """Always `task_submitted`; equals the envelope's `kind`."""
    text: str = Field(min_length=1, max_length=MAX_TASK_TEXT)
    """What the user wants, in their words."""
    repo: str = Field(min_length=1, max_length=4096)
    """Absolute path of the repository on the submitting machine (a hint; the snapshot is the truth)."""
    mode: Mode = "read"
    """read: answer only; write: may propose a patch; execute: may also run code in the sandbox."""
    budgets: Budgets = Budgets()
    """Limits of the whole task; each omitted limit takes its default."""
    models: ModelNames = ModelNames()
    """The models the LLM roles use; none at all means diagnose mode (verify the unmodified tree)."""
    snapshot: SnapshotRef | None = None
    """The working tree captured at submission; workers materialise scratch workspaces from it."""
    interactive: bool = False
    """A person is at a terminal answering confirmations (`codeloop run`)."""
    confirm_timeout_s: float = Field(default=300.0, gt=0)
    """How long a high-risk tool call waits for a person's answer before it is refused."""
    pipeline: PipelineChoice | None = None
    """The stages the task goes through, resolved from a named pipeline at submission; None: the
    standard pipeline for its mode (see `agents/orchestrator/pipeline.py`)."""


class Usage(Message):
    """What a task, a role or one step consumed."""

    requests: int = 0
    """Model requests."""
    input_tokens: int = 0
    """Tokens sent to the model (prompts, tool results), as the provider counts them."""
    output_tokens: int = 0
    """Tokens the model produced, as the provider counts them."""
    tool_calls: int = 0
    """Tool calls the model asked for."""
    cost_usd: float | None = None
    """Spend in US dollars; None while no price is known."""
    wall_s: float = 0.0
    """Wall-clock seconds; the roles leave it 0 (the task's own time is the result's `usage.wall_s`)."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def plus(self, other: "Usage") -> "Usage":
        cost = (
            None
            if self.cost_usd is None and other.cost_usd is None
            else ((self.cost_usd or 0.0) + (other.cost_usd or 0.0))
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


class PlanStep(Message):
    """One step of a plan, in the order the planner expects it done."""

    description: str
    """What to do, in a sentence for the coder (and for people reading the result)."""
    files: list[str] = []
    """Repository-relative paths this step expects to touch or read."""


class Plan(Message):
    """The planner's structured plan; a revision says why it replaces the one before."""

    steps: list[PlanStep] = []
    """What to do, in order."""
    hypotheses: list[str] = []
    """Guesses about the cause to check, e.g. "the off-by-one is in `paginate`"."""
    files_of_interest: list[str] = []
    """Repository-relative paths the planner thinks matter; the retriever ranks them up."""
    test_targets: list[str] = []
    """Test files or node ids that should show the task is done."""
    done_criteria: list[str] = []
    """What must be true when the task is done, in words."""
    revision_reason: str | None = None
    """Why this plan replaces the previous one; None for the first plan."""
    fixed: bool = False
    """True for the plan diagnose mode uses when no model is configured."""


class PlanRequest(Message):
    """Work for the planner: make a plan for the task, or revise `previous` in the light of `feedback`."""

    kind: Literal["plan_request"] = "plan_request"
    """Always `plan_request`; equals the envelope's `kind`."""
    step_id: str
    """The step this message belongs to, named by the orchestrator (`<seq>-<stage>`, e.g.
    `03-code`); a result whose step is not the one the task waits for is ignored."""
    task: TaskSubmitted
    """The whole task as submitted, so the role needs nothing but this message."""
    budget: StepBudget
    """What the step may still spend of the task's budgets."""
    previous: Plan | None = None
    """The plan being replaced, when this is a revision; None for the first plan."""
    feedback: str | None = None
    """Why the previous attempt failed, when this is a revision."""


class PlanResult(Message):
    """The planner's answer to a `PlanRequest`."""

    kind: Literal["plan_result"] = "plan_result"
    """Always `plan_result`; equals the envelope's `kind`."""
    step_id: str
    """The `step_id` of the request this answers, copied unchanged."""
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


class ContextRequest(Message):
    """Work for the retriever: find and pack the code the task and its plan are about."""

    kind: Literal["context_request"] = "context_request"
    """Always `context_request`; equals the envelope's `kind`."""
    step_id: str
    """The step this message belongs to, named by the orchestrator (`<seq>-<stage>`, e.g.
    `03-code`); a result whose step is not the one the task waits for is ignored."""
    task: TaskSubmitted
    """The whole task as submitted, so the role needs nothing but this message."""
    plan: Plan
    """The task's current plan."""
    token_budget: int = Field(default=6000, ge=200)
    """Estimated tokens (about 4 characters each) the packed context may take, repository map included."""


class Context(Message):
    """What the retriever packed for the coder: ranked files, snippets and a map within a budget."""

    kind: Literal["context"] = "context"
    """Always `context`; equals the envelope's `kind`."""
    step_id: str
    """The `step_id` of the request this answers, copied unchanged."""
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


class CodeRequest(Message):
    """Work for the coder: carry out the plan in a scratch workspace (or answer, in read mode)."""

    kind: Literal["code_request"] = "code_request"
    """Always `code_request`; equals the envelope's `kind`."""
    step_id: str
    """The step this message belongs to, named by the orchestrator (`<seq>-<stage>`, e.g.
    `03-code`); a result whose step is not the one the task waits for is ignored."""
    task: TaskSubmitted
    """The whole task as submitted, so the role needs nothing but this message."""
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


class CodeResult(Message):
    """The coder's answer to a `CodeRequest`: a patch, an answer, or why it stopped."""

    kind: Literal["code_result"] = "code_result"
    """Always `code_result`; equals the envelope's `kind`."""
    step_id: str
    """The `step_id` of the request this answers, copied unchanged."""
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


class VerifyRequest(Message):
    """Work for the verifier: judge a patch (or a read-mode answer) against the task's tree."""

    kind: Literal["verify_request"] = "verify_request"
    """Always `verify_request`; equals the envelope's `kind`."""
    step_id: str
    """The step this message belongs to, named by the orchestrator (`<seq>-<stage>`, e.g.
    `03-code`); a result whose step is not the one the task waits for is ignored."""
    task: TaskSubmitted
    """The whole task as submitted, so the role needs nothing but this message."""
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
    (the retriever's `Context.raised`); the example no longer raising with the patch is evidence
    the problem is gone when no test shows it."""


class VerifyResult(Message):
    """The verifier's answer to a `VerifyRequest`."""

    kind: Literal["verify_result"] = "verify_result"
    """Always `verify_result`; equals the envelope's `kind`."""
    step_id: str
    """The `step_id` of the request this answers, copied unchanged."""
    report: VerificationReport
    """The verdict and what it rests on."""
    baseline: Baseline | None = None
    """The starting tree's state as now known, for the next verification of this task; None when
    none was computed."""
    usage: Usage = Usage()
    """What this step consumed; the orchestrator adds it to the task's and the role's totals."""


class Finding(Message):
    """One thing a review found in a patch."""

    message: str
    """What is wrong and why, for the coder and for people."""
    path: str | None = None
    """Repository-relative path of the file, when the finding is about one."""
    line: int | None = None
    """Line in the patched file (1-based), when known."""
    rule: str | None = None
    """The reviewer's name for the kind of problem, e.g. `hardcoded-secret`."""
    severity: Literal["error", "warning", "info"] = "error"
    """How much it matters; the verdict, not the severity, decides what happens."""


class ReviewRequest(Message):
    """Work for a review role: judge the patch so far (a `review` stage of the pipeline)."""

    kind: Literal["review_request"] = "review_request"
    """Always `review_request`; equals the envelope's `kind`."""
    step_id: str
    """The step this message belongs to, named by the orchestrator (`<seq>-review`); a result
    whose step is not the one the task waits for is ignored."""
    task: TaskSubmitted
    """The whole task as submitted, so the role needs nothing but this message."""
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


class ReviewResult(Message):
    """A review role's answer: approve, request changes (a revision) or reject (the task fails)."""

    kind: Literal["review_result"] = "review_result"
    """Always `review_result`; equals the envelope's `kind`."""
    step_id: str
    """The `step_id` of the request this answers, copied unchanged."""
    verdict: Literal["approve", "request_changes", "reject"]
    """approve: go on; request_changes: the coder revises with `feedback` (counted against
    `budgets.max_revisions`); reject: the task fails with class `review.rejected`."""
    findings: list[Finding] = []
    """What the review found; shown in the result and, with `feedback`, to the coder."""
    feedback: str = ""
    """What the coder should change, in words; required in substance for `request_changes`."""
    usage: Usage = Usage()
    """What this step consumed; the orchestrator adds it to the task's and the role's totals."""


class ReviewRound(Message):
    """One review's outcome, kept on the task record and shown in the result (`reviews`)."""

    step_id: str
    """The review step."""
    role: str
    """The review role that answered."""
    verdict: Literal["approve", "request_changes", "reject"]
    """Its verdict."""
    findings: list[Finding] = []
    """What it found."""
    feedback: str = ""
    """What it asked the coder to change."""


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


class CancelTask(Message):
    """Ask the orchestrator to stop a task; published on `codeloop.task.cancel`."""

    kind: Literal["cancel_task"] = "cancel_task"
    """Always `cancel_task`; equals the envelope's `kind`."""
    reason: str = "cancelled by the user"
    """Why, for people; it ends up in the task's report."""


class Verification(Message):
    """The verifier's verdict as the result object shows it."""

    verdict: Literal["passed", "failed", "unverified"] | None = None
    """The last verification's verdict; None when the task was never verified."""
    checks: list[dict[str, Any]] = []
    """The last verification's checks in the order run: `{name, ok, summary, duration_s}` each."""
    failures: list[Failure] = []
    """What the last verification found wrong: errors first, then warnings."""
    evidence: list[str] = []
    """Tests the task is about that failed before the patch and pass with it (what `passed` rests on)."""
    preexisting: list[str] = []
    """Tests failing before the patch and still failing, unrelated to the task: listed, not blamed."""


class TaskResult(Message):
    """How a task ended; the object `codeloop run --json` prints and `status --json` shows."""

    kind: Literal["task_result"] = "task_result"
    """Always `task_result`; equals the envelope's `kind`."""
    task_id: str
    """The task's id, as `codeloop submit` printed it."""
    status: TaskStatus
    """How it ended: one of the terminal statuses (`done`, `diagnosed`, `handed_off`, `failed`,
    `cancelled`, `rejected`)."""
    mode: Mode
    """The mode the task was submitted in."""
    answer: str | None = None
    """Read mode: the answer; other modes: the coder's summary. A diagnosed or handed-off task
    without one carries its report here; None when there is neither."""
    patch: str | None = None
    """Unified diff (a/ b/ prefixes) against the submitted tree; None in read mode or when nothing
    was changed."""
    patch_ref: str | None = None
    """Reserved for the patch's name in the object store; this version always leaves it None."""
    files_changed: list[str] = []
    """Repository-relative paths the patch touches; empty in read mode."""
    plan: dict[str, Any] = {}
    """`steps`, `hypotheses`, ... of the last plan, with `revisions`: the earlier plans' reasons."""
    context: dict[str, Any] = {}
    """`files`: the retriever's files, best first."""
    verification: Verification = Verification()
    """The last verification; empty (verdict None) when the task was never verified."""
    failure_class: str | None = None
    """Why the task did not finish as done; None when it did."""
    steps: int = 0
    """Model requests, all roles together."""
    revisions: int = 0
    """Times the verifier or a review sent the patch back for revision."""
    reviews: list[ReviewRound] = []
    """Every review of the task, in order (empty without review stages)."""
    usage: dict[str, Any] = {}
    """`requests`, `input_tokens`, `output_tokens`, `tool_calls`, `cost_usd` (as in `Usage`),
    `wall_s` (seconds from submission to the end) and `by_role` (a `Usage` per role name)."""
    report: str = ""
    """Human-readable summary, or the hand-off report."""
    trace_id: str | None = None
    """The task's trace id (the envelopes' `trace_id`), for `codeloop trace`; None if never known."""


class PlanRevision(Message):
    """A plan that a revised plan replaced, kept in the task's history."""

    plan: Plan
    """The replaced plan."""
    reason: str
    """Why it was replaced: the new plan's `revision_reason`, or `revised` when it gave none."""
    at_step: int
    """Steps dispatched when it was replaced (the task's `step_seq` then)."""


class TaskState(Message):
    """The task record in the `codeloop-tasks` KV bucket; every transition is written here first."""

    kind: Literal["task_state"] = "task_state"
    """Always `task_state`."""
    task_id: str
    """The task's id; also the record's key."""
    status: TaskStatus
    """Where the task is; one of the terminal statuses once it has ended."""
    task: TaskSubmitted
    """The submission, as received."""
    created_at: datetime
    """When the orchestrator accepted the submission (UTC); the deadline counts from here."""
    updated_at: datetime
    """When the record last changed (UTC)."""
    trace_id: str | None = None
    """The task's trace id (the envelopes' `trace_id`)."""
    stage: str | None = None
    """The pipeline stage in progress (`plan`, `retrieve`, `code`, `verify`, ...)."""
    expected_step: str | None = None
    """The step id whose result the task waits for; any other result is stale."""
    step_seq: int = 0
    """Steps dispatched so far; step ids are numbered from it."""
    steps_done: list[str] = []
    """Step ids whose results were applied, in order."""
    plan: Plan | None = None
    """The current plan; None before the planner answered (or in a pipeline without one)."""
    plan_history: list[PlanRevision] = []
    """Plans that revisions replaced, oldest first."""
    context: Context | None = None
    """The retriever's latest context; None before it answered."""
    patch: str | None = None
    """The latest patch from the coder (unified diff); None when it changed nothing."""
    files_changed: list[str] = []
    """Repository-relative paths the latest patch touches."""
    answer: str | None = None
    """The coder's latest answer or summary (an echo pipeline's reply)."""
    baseline: Baseline | None = None
    """The starting tree's state as the verifier last reported it, passed to the next verification."""
    last_report: VerificationReport | None = None
    """The latest verification report; None before the first verification."""
    failure_signatures: list[str] = []
    """One signature of each failed verification's failure set, to stop identical retries."""
    revisions: int = 0
    """Times the verifier sent the patch back for revision."""
    reviews: list[ReviewRound] = []
    """Every review so far, in order."""
    review_feedback: str | None = None
    """A review's request for changes, for the coder's next revision; cleared once it answered."""
    stage_index: int | None = None
    """The position of that stage in the task's pipeline (a pipeline may have several review stages)."""
    stage_role: str | None = None
    """The role whose step the task waits for (the stage's `ROLE`)."""
    waiting_for: str | None = None
    """Set while no live worker of `stage_role` is known: the task says what it waits for."""
    failed_revisions_since_plan: int = 0
    """Failed revisions since the last (re)plan; past a threshold the task is planned again."""
    tool_failures: int = 0
    """Consecutive failed tool calls at the end of the coder's latest run."""
    usage: Usage = Usage()
    """What all steps so far consumed together."""
    by_role: dict[str, Usage] = {}
    """What each role's steps consumed, by role name."""
    outbox: list[dict[str, Any]] = []
    """What the last transition asked to publish (subject, kind, payload, label), so a redelivered
    message after a crash republishes the same messages under the same ids."""
    outbox_cause: str | None = None
    """Id of the message whose transition wrote the outbox."""
    outbox_request_id: str | None = None
    """Id of the work request in the outbox, which a result without a `step_id` points at."""
    result: TaskResult | None = None
    """The final result, set when the task reaches a terminal status; None until then."""
    error: str | None = None
    """Why the task was rejected or a message of it was given up; None otherwise."""


register_payloads(
    TaskSubmitted,
    PlanRequest,
    PlanResult,
    ContextRequest,
    Context,
    CodeRequest,
    CodeResult,
    VerifyRequest,
    VerifyResult,
    ReviewRequest,
    ReviewResult,
    StepFailed,
    CancelTask,
    TaskResult,
    TaskState,
    VerificationReport,
)
