"""The payloads of a task's path, registered with the bus at import.

A task travels as messages between the orchestrator and the roles (see `agents/orchestrator/`):

    client ─ TaskSubmitted ─► orchestrator ─ PlanRequest ──► planner   ─ PlanResult ──► orchestrator
                                           ─ ContextRequest ► retriever ─ Context ─────►
                                           ─ CodeRequest ──► coder     ─ CodeResult ──►
                                           ─ VerifyRequest ► verifier  ─ VerifyResult ►
                                           (any role)                  ─ StepFailed ──►
    orchestrator ─ TaskResult ─► codeloop.events.<task_id>.result

What lives where:

    task.py          the task as submitted and as it ends: `TaskSubmitted` (budgets, models, pipeline),
                     `CancelTask`, `Usage`, `TaskResult` (the object `codeloop run --json` prints)
    steps.py         one step: `StepRequest` (the base of every request: its `step_id` and the whole
                     task) and `StepResult`, the request and result of each built-in stage kind,
                     `StepFailed`
    snapshot.py      the name of a captured working tree (`SnapshotRef`), which submissions carry
    echo.py          the `echo` smoke stage's `EchoRequest` and `EchoResult`
    mcp_servers.py   the user's own MCP servers as a task carries them (`McpServer`)
    plan.py          the planner's `Plan` and its `PlanStep`s
    approval.py      a person's `Approval` of a high-risk change
    continuation.py  what a task continuing an ended one inherits from it (`Continuation`)
    record.py        the task record in the KV bucket (`TaskState`)
    verification.py  the verifier's report and a task's baseline
    status.py        a task's status: the machine's own (`submitted`, `revising`, the terminal ones)
                     and the names stage kinds declare (`TaskStatus` accepts both)
    selection.py     several attempts at one task and the choice among them: `Attempt`,
                     `Selection`, the `select` stage's `SelectRequest` and `SelectResult`

Every name is importable from `agents.messages` itself. Requests carry the whole task and the
budget the step may still spend, so a role needs nothing but the message (and the bus's object
store for the repository snapshot): any worker anywhere can take it. Models are closed and frozen
like every bus payload (`bus.messages.Message`); field names, `kind` tags and JSON are the wire
contract other-language workers rely on (docs/bus-contract.md).
"""

from agents.messages.continuation import Continuation
from agents.messages.echo import EchoRequest, EchoResult
from agents.messages.mcp_servers import McpServer
from agents.messages.plan import Plan, PlanStep
from agents.messages.record import OutboxItem, PlanRevision, QuotaAllowance, TaskState
from agents.messages.selection import Attempt, Selection, SelectRequest, SelectResult
from agents.messages.snapshot import SkippedPath, SnapshotRef
from agents.messages.status import (
    MACHINE_STATUSES,
    TERMINAL_STATUSES,
    EndStatus,
    TaskStatus,
    status_problem,
)
from agents.messages.steps import (
    CodeRequest,
    CodeResult,
    Context,
    ContextRequest,
    PlanRequest,
    PlanResult,
    RankedFile,
    ReviewRequest,
    ReviewResult,
    Snippet,
    StepBudget,
    StepFailed,
    StepRequest,
    StepResult,
    VerifyRequest,
    VerifyResult,
)
from agents.messages.task import (
    BUILTIN_MODEL_ROLES,
    LLM_ROLES,
    MAX_ATTEMPTS,
    MAX_TASK_TEXT,
    Approval,
    Budgets,
    CancelTask,
    Candidate,
    Finding,
    LlmRole,
    Mode,
    ModelChain,
    ModelNames,
    ModelOptions,
    PipelineChoice,
    ReviewRound,
    TaskResult,
    TaskSubmitted,
    Usage,
    Verification,
)
from agents.messages.verification import (
    Baseline,
    Check,
    EnvironmentUse,
    Failure,
    StaticFinding,
    TestOutcomes,
    VerificationReport,
)
from bus.messages import register_payloads

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
    SelectRequest,
    SelectResult,
    EchoRequest,
    EchoResult,
    StepFailed,
    CancelTask,
    TaskResult,
    TaskState,
    VerificationReport,  # pyright: ignore[reportArgumentType] - VerificationReport is a BaseModel with a kind, registered for the events that carry it
)

__all__ = [
    "MAX_ATTEMPTS",
    "Approval",
    "McpServer",
    "Attempt",
    "BUILTIN_MODEL_ROLES",
    "LLM_ROLES",
    "MAX_TASK_TEXT",
    "TERMINAL_STATUSES",
    "MACHINE_STATUSES",
    "EndStatus",
    "status_problem",
    "Baseline",
    "Budgets",
    "CancelTask",
    "Candidate",
    "Check",
    "CodeRequest",
    "Continuation",
    "EchoRequest",
    "EchoResult",
    "CodeResult",
    "Context",
    "ContextRequest",
    "EnvironmentUse",
    "Failure",
    "Finding",
    "LlmRole",
    "Mode",
    "ModelChain",
    "ModelNames",
    "ModelOptions",
    "PipelineChoice",
    "Plan",
    "PlanRequest",
    "PlanResult",
    "OutboxItem",
    "PlanRevision",
    "PlanStep",
    "RankedFile",
    "ReviewRequest",
    "ReviewResult",
    "ReviewRound",
    "SelectRequest",
    "SelectResult",
    "Selection",
    "Snippet",
    "SkippedPath",
    "SnapshotRef",
    "StaticFinding",
    "StepBudget",
    "StepFailed",
    "StepRequest",
    "StepResult",
    "TaskResult",
    "TaskState",
    "QuotaAllowance",
    "TaskStatus",
    "TaskSubmitted",
    "TestOutcomes",
    "Usage",
    "Verification",
    "VerificationReport",
]
