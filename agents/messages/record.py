"""The task record: one `TaskState` per task in the `codeloop-tasks` KV bucket.

The orchestrator writes every transition here (compare-and-set) before it acts, so a restarted
orchestrator resumes a task from its record; the record ends holding the task's `TaskResult`.
"""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import JsonValue, WithJsonSchema
from typing_extensions import TypedDict  # pydantic validates only this one before Python 3.12

from agents.messages.selection import Attempt, Selection
from agents.messages.status import TaskStatus
from agents.messages.steps import Context, Plan
from agents.messages.task import Approval, ReviewRound, TaskResult, TaskSubmitted, Usage
from agents.messages.verification import Baseline, VerificationReport
from bus.messages import Message


class OutboxItem(TypedDict):
    """One message a transition asked to publish, as the record keeps it."""

    subject: str
    """The subject it is published on."""
    kind: str
    """The payload's message kind (what model reads it back)."""
    payload: Annotated[dict[str, JsonValue], WithJsonSchema({"type": "object"})]
    """The message, as JSON (valid against the schema of `kind`)."""
    label: str
    """What its id is derived from (with the delivery's id), so a republish keeps the id."""


class PlanRevision(Message):
    """A plan that a revised plan replaced, kept in the task's history."""

    plan: Plan
    """The replaced plan."""
    reason: str
    """Why it was replaced: the new plan's `revision_reason`, or `revised` when it gave none."""
    at_step: int
    """Steps dispatched when it was replaced (the task's `step_seq` then)."""


class QuotaAllowance(Message):
    """The principal's daily quota as it bounds one running task (`agents.quotas`): the limits,
    and what the principal's other tasks of the day had used when the orchestrator last looked."""

    principal: str
    """Who submitted the task: the quota is theirs."""
    key: str
    """The center's table the quota comes from (`quotas.alice`, `quotas.default`)."""
    day: str
    """The UTC day (`YYYY-MM-DD`) the task counts on."""
    tokens_per_day: int | None = None
    """Tokens the principal may use per UTC day, over all its tasks; None: no limit."""
    cost_per_day_usd: float | None = None
    """Dollars the principal may spend per UTC day, over all its tasks; None: no limit."""
    others_tokens: int = 0
    """Tokens the principal's other tasks of the day had used."""
    others_cost_usd: float = 0.0
    """Dollars the principal's other tasks of the day had spent."""


class TaskState(Message):
    """The task record in the `codeloop-tasks` KV bucket; every transition is written here first."""

    kind: Literal["task_state"] = "task_state"
    """Always `task_state`."""
    task_id: str
    """The task's id; also the record's key."""
    status: TaskStatus
    """Where the task is: `submitted`, then the status of the stage in progress (its kind's:
    `planning`, `coding`, `reviewing`, a plug-in kind's own, ...), and one of the terminal
    statuses once it has ended (`agents.messages.status`)."""
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
    approvals: list[Approval] = []
    """Paths a person approved the coder changing (protected paths), with who approved: passed to
    every verification and into the result."""
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
    attempt: int = 1
    """The attempt the code stage is on (`budgets.attempts`); a revision of the chosen attempt is
    numbered after the attempts made."""
    revision_of: int | None = None
    """The attempt the current one revises, while a chosen attempt is being revised."""
    candidates: list[Attempt] = []
    """The attempts judged so far, in order (with `budgets.attempts` above 1)."""
    attempts_stopped_by: str | None = None
    """What stopped the attempts before `budgets.attempts` were made: a budget (`budget.*`) before
    the next one could start, or the failure class that ended the coder's run of one; None otherwise."""
    selection: Selection | None = None
    """The `select` stage's latest choice; None before it chose."""
    usage: Usage = Usage()
    """What all steps so far consumed together."""
    by_role: dict[str, Usage] = {}
    """What each role's steps consumed, by role name."""
    outbox: list[OutboxItem] = []
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
    config_revision: int | None = None
    """The configuration center's revision the task started under (kept for its whole life)."""
    principal: str = "local"
    """Who submitted it (`TaskSubmitted.principal`), whose quota and ledger it counts against."""
    usage_day: str | None = None
    """The UTC day the task counts on in the quota ledger; None: not counted (no ledger)."""
    quota: QuotaAllowance | None = None
    """The principal's quota while the task runs; None: no quota applies."""
