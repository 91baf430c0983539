"""The task as a client submits it and as it ends: the submission, its budgets and models, and
the result object (`codeloop run --json`).

`TaskSubmitted` travels on `codeloop.task.submit`, `CancelTask` on `codeloop.task.cancel`, and the
orchestrator publishes the `TaskResult` on `codeloop.events.<task_id>.result` when the task ends.
`Usage` is what a task, a role or one step consumed; the result's `reviews` and `verification` are
the judgements of its patch (`Finding`, and the verifier's report in `agents.messages.verification`).
"""

from typing import Any, Literal

from pydantic import Field

from agents.messages.approval import Approval
from agents.messages.continuation import Continuation
from agents.messages.mcp_servers import McpServer
from agents.messages.snapshot import SnapshotRef
from agents.messages.status import TaskStatus
from agents.messages.verification import EnvironmentUse, Failure
from bus.messages import Message

Mode = Literal["read", "write", "execute"]


MAX_TASK_TEXT = 96 * 1024
"""Characters of task text a submission may carry; the record and every request hold it, and a
NATS message is capped at 1 MiB by default."""


MAX_USER_INSTRUCTIONS = 64 * 1024
"""Characters of the user's own instructions file a submission carries."""
MAX_ATTEMPTS = 10
"""Most candidates one task may ask for (`budgets.attempts`)."""


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
    attempts: int = Field(default=1, ge=1, le=MAX_ATTEMPTS)
    """Candidates the coder makes, each from the starting tree and verified against it; above 1 a
    `select` stage chooses one. The other budgets bind over all attempts together."""


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
    context_tokens: int | None = Field(default=None, ge=256)
    """The model's context window in tokens: a prompt that cannot fit is an error naming both
    numbers (`model.context`). For `local:` models, the context the server is started with (default
    8192); for others, what the server reports when this is unset (`agents.models.context`)."""

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


LlmRole = Literal["planner", "coder"]
LLM_ROLES: tuple[LlmRole, ...] = ("planner", "coder")
"""The built-in roles that run a model (the others use none)."""
BUILTIN_MODEL_ROLES = ("default", *LLM_ROLES)


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
    """`KIND:ROLE` of each stage in order; kinds are the installed stage kinds (`plan`, `retrieve`,
    `code`, `review`, `verify`, `select`, `echo`, and those plug-ins add)."""


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
    require_verified: bool = False
    """A patch whose verification is `unverified` (no test executes the changed code) ends the task
    `handed_off` with `verify.unverified` instead of `done` (`--require-verified`)."""
    instructions: bool = True
    """Give the roles the project's instructions (`AGENTS.md` files, `agents.instructions`);
    False with `--no-instructions`."""
    user_instructions: str | None = Field(default=None, max_length=MAX_USER_INSTRUCTIONS)
    """The user's own `AGENTS.md` (from the user configuration directory), read at submission."""
    mcp_servers: list[McpServer] = Field(default=[], max_length=32)
    """The user's MCP servers whose tools the coder is offered (`agents.messages.mcp_servers`)."""
    continuation: Continuation | None = None
    """Set when the task continues an ended one (`codeloop continue`): the parent, its patch (the
    workspace's starting point), its plan, an account of it and the new instruction; None for a
    new task."""
    principal: str | None = Field(default=None, max_length=256)
    """Who submitted it, for quotas: the tasks server's caller; None: `local`, the command line."""
    pinned: list[str] = Field(default=[], max_length=256)
    """Dotted keys (`models.coder`, `budgets.max_steps`) the submitter set on its command line or in
    its environment: the configuration center does not override them (precedence: command line >
    the center > the repository file > the user file > defaults)."""


class CancelTask(Message):
    """Ask the orchestrator to stop a task; published on `codeloop.task.cancel`."""

    kind: Literal["cancel_task"] = "cancel_task"
    """Always `cancel_task`; equals the envelope's `kind`."""
    reason: str = "cancelled by the user"
    """Why, for people; it ends up in the task's report."""


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
    environment: EnvironmentUse | None = None
    """The project environment the last verification's tests ran in (key, recipe source, Python,
    whether and how long it was built); None when there was none."""


class Candidate(Message):
    """One attempt of a task run with `budgets.attempts` above 1, as the result shows it."""

    attempt: int
    """Its number: 1, 2, ... in the order made (a revision of the chosen one comes after them)."""
    patch: str
    """Its unified diff against the starting tree; empty when it changed nothing."""
    verdict: Literal["passed", "failed", "unverified"] | None = None
    """Its verification's verdict; None when it was not verified."""
    evidence: list[str] = []
    """What its `passed` rests on: the tests that failed before it and pass with it."""
    cluster: int | None = None
    """Its behaviour cluster (1 the largest: the attempts that behave alike); None when unknown."""
    chosen: bool = False
    """True for the attempt the task went on with (its patch is the result's `patch`)."""
    reason: str = ""
    """Why it was chosen, or where it ranked and why not; empty before a choice was made."""
    evidence_kind: str = "none"
    """What decided a `passed` verdict: `flip`, `reproduction`, `example`; `none` otherwise."""
    files_changed: list[str] = []
    """Repository-relative paths its patch touches."""
    summary: str = ""
    """Its verification's one-line summary."""
    revision_of: int | None = None
    """The attempt it revises, when it is a revision of the chosen one; None otherwise."""


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
    approvals: list[Approval] = []
    """The high-risk changes a person approved (protected paths the patch may change), in order."""
    candidates: list[Candidate] = []
    """With `budgets.attempts` above 1: every attempt, its verdict, and which was chosen and why;
    empty otherwise."""
    usage: dict[str, Any] = {}
    """`requests`, `input_tokens`, `output_tokens`, `tool_calls`, `cost_usd` (as in `Usage`),
    `wall_s` (seconds from submission to the end) and `by_role` (a `Usage` per role name)."""
    report: str = ""
    """Human-readable summary, or the hand-off report."""
    trace_id: str | None = None
    """The task's trace id (the envelopes' `trace_id`), for `codeloop trace`; None if never known."""
    parent_task_id: str | None = None
    """The task this one continued (`codeloop continue`); its patch is part of this one's, which is
    the combined patch against the same starting tree. None for a task that continues none."""
    config_revision: int | None = None
    """The configuration center's revision the task ran under; None: the bus had no center document."""
