"""The payloads of a task's path, as they travel inside an `Envelope` (see `bus/envelope.py`).

Each payload names itself with a literal `kind`, which is also the envelope's `kind`, so a reader in
any language can dispatch on one string. Models are closed (`extra="forbid"`): we produce and
version them together, so drift fails loudly instead of being dropped. `codeloop schema` prints
`json_schemas()` for agents written in other languages.
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
"""Bumped on any incompatible change of an envelope or payload."""

Mode = Literal["read", "write", "execute"]
TaskStatus = Literal[
    "submitted", "planning", "retrieving", "coding", "verifying", "revising", "done", "handed_off", "failed"
]
TERMINAL_STATUSES: frozenset[str] = frozenset({"done", "handed_off", "failed"})


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Budgets(Message):
    """Limits that end every loop; ending by one hands the task to a human."""

    max_steps: int = Field(default=30, ge=1)
    """Tool calls and agent steps, all roles together."""
    max_revisions: int = Field(default=3, ge=0)
    """Times the verifier may send a patch back for revision."""
    max_tool_failures: int = Field(default=5, ge=1)
    """Consecutive failed tool calls before the coder gives up."""
    deadline_s: float = Field(default=1800.0, gt=0)
    """Wall-clock limit for the whole task."""
    max_tokens: int = Field(default=200_000, ge=1)
    """Model tokens, input and output, all roles together."""


class Usage(Message):
    """What a task or one agent step consumed."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    latency_s: float = 0.0


class TaskSubmitted(Message):
    """A client asks for a task; published on `codeloop.task.submit`, deduplicated by envelope id."""

    kind: Literal["task_submitted"] = "task_submitted"
    text: str = Field(min_length=1)
    """What the user wants, in their words."""
    repo: str
    """Path (or URL) of the repository the task is about."""
    mode: Mode = "read"
    """read: answer only; write: may propose a patch; execute: may also run code in the sandbox."""
    budgets: Budgets = Budgets()


class PlanStep(Message):
    description: str
    files: list[str] = []
    """Repository-relative paths this step expects to touch or read."""


class Plan(Message):
    """The planner's structured plan."""

    kind: Literal["plan"] = "plan"
    steps: list[PlanStep]
    hypotheses: list[str] = []
    files_of_interest: list[str] = []
    revision_reason: str | None = None
    """Why this plan replaces the previous one; None for the first plan."""


class PlanRequest(Message):
    kind: Literal["plan_request"] = "plan_request"
    task: TaskSubmitted
    previous: Plan | None = None
    feedback: str | None = None
    """Why the previous attempt failed, when this is a revision."""


class Snippet(Message):
    path: str
    start_line: int
    end_line: int
    symbol: str | None = None
    text: str
    score: float = 0.0


class ContextRequest(Message):
    kind: Literal["context_request"] = "context_request"
    repo: str
    query: str
    files_of_interest: list[str] = []
    token_budget: int = 6000


class Context(Message):
    """What the retriever packed for the coder: snippets and a repository map within a token budget."""

    kind: Literal["context"] = "context"
    snippets: list[Snippet] = []
    repo_map: str = ""
    tokens: int = 0


class Failure(Message):
    """One structured verification failure, precise enough to act on."""

    failure_class: Literal["test_failure", "test_error", "static_check", "patch_rejected", "timeout", "other"]
    test_id: str | None = None
    path: str | None = None
    line: int | None = None
    message: str
    stack_summary: str | None = None


class CodeRequest(Message):
    kind: Literal["code_request"] = "code_request"
    task: TaskSubmitted
    plan: Plan
    context: Context
    failures: list[Failure] = []
    """Failures of the previous patch, when revising."""


class PatchProposal(Message):
    kind: Literal["patch_proposal"] = "patch_proposal"
    diff: str
    """Unified diff against the task's repository."""
    summary: str = ""
    usage: Usage = Usage()


class CheckResult(Message):
    name: str
    passed: bool
    output: str = ""


class VerifyRequest(Message):
    kind: Literal["verify_request"] = "verify_request"
    repo: str
    diff: str
    test_command: list[str] | None = None


class VerificationReport(Message):
    kind: Literal["verification_report"] = "verification_report"
    passed: bool
    checks: list[CheckResult] = []
    failures: list[Failure] = []


class EchoRequest(Message):
    """Work for the `echo` role, which carries tasks end to end until the real agents exist."""

    kind: Literal["echo_request"] = "echo_request"
    text: str


class EchoResult(Message):
    kind: Literal["echo_result"] = "echo_result"
    text: str


class TaskResult(Message):
    kind: Literal["task_result"] = "task_result"
    status: TaskStatus
    answer: str | None = None
    patch_ref: str | None = None
    """Object-store name of the patch, when there is one."""
    report: VerificationReport | None = None
    usage: Usage = Usage()
    trace_id: str | None = None


class TaskState(Message):
    """The task record kept in the `codeloop-tasks` KV bucket; every transition is written here first."""

    kind: Literal["task_state"] = "task_state"
    task_id: str
    status: TaskStatus
    task: TaskSubmitted
    created_at: datetime
    updated_at: datetime
    step: int = 0
    revisions: int = 0
    retries: int = 0
    plan: Plan | None = None
    usage: Usage = Usage()
    result: TaskResult | None = None
    error: str | None = None


class Event(Message):
    """Something that happened to a task, on `codeloop.events.<task_id>.<name>`."""

    kind: Literal["event"] = "event"
    name: str
    """What happened: `transition`, `tool_call`, `step`, `dead_letter`, `result`, ..."""
    message: str = ""
    data: dict[str, Any] = {}


class DeadLetter(Message):
    """A message that could not be handled, with the reason; published as an event, never silently dropped."""

    kind: Literal["dead_letter"] = "dead_letter"
    reason: Literal["malformed", "unsupported_schema_version", "max_deliveries", "handler_error"]
    error: str
    subject: str
    data: str
    """The original message, decoded as UTF-8 with replacement, cut to 64 KiB."""
    deliveries: int = 1


PAYLOADS: tuple[type[Message], ...] = (
    TaskSubmitted, PlanRequest, Plan, ContextRequest, Context, CodeRequest, PatchProposal,
    VerifyRequest, VerificationReport, EchoRequest, EchoResult, TaskResult, TaskState, Event, DeadLetter,
)  # fmt: skip
PAYLOAD_BY_KIND: dict[str, type[Message]] = {p.model_fields["kind"].default: p for p in PAYLOADS}


def json_schemas() -> dict[str, Any]:
    """JSON Schema of the envelope and of every payload, keyed by kind, for agents in other languages."""
    from bus.envelope import Envelope

    return {
        "schema_version": SCHEMA_VERSION,
        "envelope": Envelope.model_json_schema(),
        "payloads": {kind: model.model_json_schema() for kind, model in PAYLOAD_BY_KIND.items()},
    }
