"""A task's timeline, built from its events alone: steps by role, with their model and tool calls.

Events name their step (`data.step_id`: transitions, model calls, tool calls); an event that does
not (the orchestrator's `plan`, `retrieval`, `code`, `verification`) belongs to the step running
when it was published, whose result it reports. A step lasts from its dispatch (its `transition`)
to the next transition of the task. This is what `codeloop trace` prints, and `--json` prints
`Timeline.model_dump()`; `trace` adds the configuration the task ran with from its record.
"""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from bus.envelope import Envelope


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


class ModelCallEntry(_Model):
    at: datetime
    model: str
    outcome: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None
    attempts: int = 1


class ToolCallEntry(_Model):
    at: datetime
    server: str
    tool: str
    outcome: str
    """ok, refused or error."""
    duration_ms: float = 0.0
    error_type: str | None = None
    arguments: dict[str, Any] = {}
    """Redacted; contents and patches as their size and sha256."""


class NoteEntry(_Model):
    """Any other event of the step: the plan, the retrieval's files, the verdict, a hand-off."""

    at: datetime
    name: str
    message: str
    data: dict[str, Any] = {}


class StepEntry(_Model):
    step_id: str
    role: str
    stage: str | None = None
    status: str | None = None
    started_at: datetime
    duration_s: float | None = None
    """None while the step runs."""
    model_calls: list[ModelCallEntry] = []
    tool_calls: list[ToolCallEntry] = []
    notes: list[NoteEntry] = []


class RoleSummary(_Model):
    steps: int = 0
    duration_s: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class PlanRevisionEntry(_Model):
    at: datetime
    step_id: str | None
    steps: int
    """Steps of the plan."""
    reason: str | None
    """Why it replaced the previous plan; None for the first."""


class ChainEntry(_Model):
    """Where a task stands in a chain of continuations (`codeloop continue`)."""

    parent_task_id: str | None = None
    """The task it continues; None when it continues none."""
    parent_ended: str | None = None
    """How that task ended (`handed_off (budget.steps)`, `done`, ...)."""
    ancestors: list[str] = []
    """Every earlier task of the chain, oldest first, ending with the parent."""
    instruction: str | None = None
    """The instruction it was continued with; None: go on with the same task."""
    continued_by: list[str] = []
    """The tasks that continue it, oldest first."""


class Timeline(_Model):
    task_id: str
    trace_id: str | None = None
    status: str | None = None
    """The task's last known status (`done`, `handed_off`, ... once it ended)."""
    failure_class: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_s: float | None = None
    steps: list[StepEntry] = []
    roles: dict[str, RoleSummary] = {}
    plans: list[PlanRevisionEntry] = []
    outside_steps: list[NoteEntry] = []
    """Events before the first step or not tied to one (a rejection, a dead letter)."""
    events: int = 0
    configuration: dict[str, Any] | None = None
    """The task's effective configuration from its record: `mode`, `models` (every role's model,
    fallbacks, per-model settings), `budgets`; None when the record is gone."""
    chain: ChainEntry | None = None
    """The chain of continuations the task is part of; None when it continues none and none
    continues it (or its record is gone)."""


def build_timeline(task_id: str, envelopes: list[Envelope]) -> Timeline:
    """The timeline of `task_id` from its envelopes (in stream order)."""
    timeline = Timeline(task_id=task_id, events=len(envelopes))
    by_id: dict[str, StepEntry] = {}
    current: StepEntry | None = None
    for envelope in envelopes:
        at = envelope.sent_at
        timeline.trace_id = timeline.trace_id or envelope.trace_id
        timeline.started_at = timeline.started_at or at
        timeline.ended_at = at
        payload = envelope.payload
        if envelope.kind == "task_result":
            _close(current, at)
            current = None
            timeline.status = payload.get("status")
            timeline.failure_class = payload.get("failure_class")
            timeline.trace_id = payload.get("trace_id") or timeline.trace_id
            continue
        if envelope.kind == "dead_letter":
            note = NoteEntry(
                at=at,
                name="dead_letter",
                message=str(payload.get("error", ""))[:300],
                data={"reason": payload.get("reason"), "subject": payload.get("subject")},
            )
            _place(timeline, current, note)
            continue
        if envelope.kind != "event":
            continue
        name, data = str(payload.get("name", "")), payload.get("data") or {}
        step = by_id.get(data.get("step_id") or "") or current
        if name == "transition":
            _close(current, at)
            timeline.status = data.get("status") or timeline.status
            if data.get("failure_class"):
                timeline.failure_class = data["failure_class"]
            if data.get("step_id"):
                current = StepEntry(
                    step_id=data["step_id"],
                    role=str(data.get("role") or "?"),
                    stage=data.get("stage"),
                    status=data.get("status"),
                    started_at=at,
                )
                by_id[current.step_id] = current
                timeline.steps.append(current)
            else:
                current = None
                note = NoteEntry(at=at, name=name, message=str(payload.get("message", "")), data=data)
                _place(timeline, timeline.steps[-1] if timeline.steps else None, note)
        elif name == "model_call" and step is not None:
            step.model_calls.append(
                ModelCallEntry(
                    at=at,
                    model=str(data.get("model")),
                    outcome=str(data.get("outcome")),
                    input_tokens=int(data.get("input_tokens") or 0),
                    output_tokens=int(data.get("output_tokens") or 0),
                    latency_s=float(data.get("latency_s") or 0.0),
                    cost_usd=data.get("cost_usd"),
                    attempts=int(data.get("attempts") or 1),
                )
            )
        elif name == "tool_call" and step is not None:
            step.tool_calls.append(
                ToolCallEntry(
                    at=at,
                    server=str(data.get("server")),
                    tool=str(data.get("tool")),
                    outcome=str(data.get("outcome")),
                    duration_ms=float(data.get("duration_ms") or 0.0),
                    error_type=data.get("error_type"),
                    arguments=data.get("arguments") or {},
                )
            )
        else:
            if name == "plan":
                plan = data.get("plan") or {}
                timeline.plans.append(
                    PlanRevisionEntry(
                        at=at,
                        step_id=step.step_id if step else None,
                        steps=len(plan.get("steps") or []),
                        reason=plan.get("revision_reason"),
                    )
                )
            _place(
                timeline,
                step,
                NoteEntry(at=at, name=name, message=str(payload.get("message", "")), data=_small(name, data)),
            )
    if timeline.started_at and timeline.ended_at:
        timeline.duration_s = round((timeline.ended_at - timeline.started_at).total_seconds(), 3)
    timeline.roles = _roles(timeline.steps)
    return timeline


def _close(step: StepEntry | None, at: datetime) -> None:
    if step is not None and step.duration_s is None:
        step.duration_s = round((at - step.started_at).total_seconds(), 3)


def _place(timeline: Timeline, step: StepEntry | None, note: NoteEntry) -> None:
    (step.notes if step is not None else timeline.outside_steps).append(note)


def _small(name: str, data: dict[str, Any]) -> dict[str, Any]:
    # The plan itself is in the task's result; the timeline keeps what a reader scans.
    if name == "plan":
        plan = data.get("plan") or {}
        return {
            "steps": [s.get("description") for s in plan.get("steps") or []],
            "revision_reason": plan.get("revision_reason"),
        }
    return data


def _roles(steps: list[StepEntry]) -> dict[str, RoleSummary]:
    roles: dict[str, RoleSummary] = {}
    for step in steps:
        summary = roles.setdefault(step.role, RoleSummary())
        summary.steps += 1
        summary.duration_s = round(summary.duration_s + (step.duration_s or 0.0), 3)
        summary.model_calls += len(step.model_calls)
        summary.tool_calls += len(step.tool_calls)
        for call in step.model_calls:
            summary.input_tokens += call.input_tokens
            summary.output_tokens += call.output_tokens
            if call.cost_usd is not None:
                summary.cost_usd = (summary.cost_usd or 0.0) + call.cost_usd
    return roles
