"""The console's pages: Jinja2 templates (autoescaped) and the views they are given.

Templates live beside this module (`templates/`) and render on the server; the browser gets HTML,
and htmx and `console.js` only swap server-rendered fragments in. A view is built here from the
task's record so that a template only lays out what it is handed.
"""

from dataclasses import dataclass, field
from datetime import UTC
from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from pydantic import JsonValue

from agents.messages import TERMINAL_STATUSES, Approval, Failure, PlanRevision, RankedFile, TaskState
from codeloop.console.diffs import FileDiff, split_patch
from codeloop.console.events import EventRow
from codeloop.console.tasks import TaskPage
from tool_servers.tasks.views import PendingConfirmation

TEMPLATES = Path(__file__).with_name("templates")
REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 501: "Not Implemented"}


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = _age
    env.filters["cost"] = _cost
    env.filters["first_line"] = _first_line
    env.filters["basename"] = _basename
    return env


def render(name: str, **context: object) -> str:
    """The page `name` of the templates with `context` as its variables."""
    return environment().get_template(name).render(**context)


def render_row(row: EventRow) -> Markup:
    """One timeline row's markup (`templates/event_row.html`), safe to put in a page as it is."""
    return Markup(render("event_row.html", e=row))


def refusal_page(status: int, message: str) -> str:
    return render(
        "refusal.html", status=status, reason=REASONS.get(status, "Refused"), message=message, caller=None
    )


@dataclass(frozen=True)
class PanelView:
    """What a task's panel shows (`templates/panel.html`)."""

    task_id: str
    status: str
    ended: bool
    principal: str
    stage: str | None = None
    mode: str = ""
    repo: str = ""
    text: str = ""
    created: str = ""
    failure_class: str | None = None
    error: str | None = None
    waiting_for: str | None = None
    parent_task_id: str | None = None
    """The task this one continues."""
    pending: PendingConfirmation | None = None
    budgets: list[tuple[str, str, str]] = field(default_factory=list)
    plan_steps: list[str] = field(default_factory=list)
    revisions: list[PlanRevision] = field(default_factory=list[PlanRevision])
    context_files: list[RankedFile] = field(default_factory=list[RankedFile])
    verdict: str | None = None
    evidence: list[str] = field(default_factory=list)
    checks: list[dict[str, JsonValue]] = field(default_factory=list[dict[str, JsonValue]])
    failures: list[Failure] = field(default_factory=list[Failure])
    approvals: list[Approval] = field(default_factory=list[Approval])
    files: list[FileDiff] = field(default_factory=list)
    has_patch: bool = False
    report: str | None = None
    answer: str | None = None


def panel_view(task_id: str, page: TaskPage) -> PanelView:
    state = page.state
    if state is None:
        return PanelView(task_id=task_id, status="submitted", ended=False, principal=page.principal)
    result = state.result
    report = state.last_report
    verification = result.verification if result is not None else None
    if verification is not None and verification.verdict:
        verdict, checks, failures = verification.verdict, verification.checks, verification.failures
        evidence = verification.evidence
    elif report is not None:
        verdict, checks = report.verdict, [c.model_dump() for c in report.checks]
        failures, evidence = report.failures, report.evidence
    else:
        verdict, checks, failures, evidence = None, [], [], []
    answer = result.answer if result is not None else state.answer
    text_report = result.report if result is not None else None
    return PanelView(
        task_id=task_id,
        status=state.status,
        ended=state.status in TERMINAL_STATUSES,
        principal=page.principal,
        stage=state.stage,
        mode=state.task.mode,
        repo=state.task.repo,
        text=state.task.text,
        created=state.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        failure_class=result.failure_class if result is not None else None,
        error=state.error,
        waiting_for=state.waiting_for,
        parent_task_id=state.task.continuation.parent_task_id if state.task.continuation else None,
        pending=page.pending,
        budgets=_budgets(state),
        plan_steps=[s.description for s in state.plan.steps] if state.plan else [],
        revisions=list(state.plan_history),
        context_files=list(state.context.files) if state.context else [],
        verdict=verdict,
        evidence=list(evidence),
        checks=list(checks),
        failures=list(failures),
        approvals=list(state.approvals),
        files=split_patch(state.patch) if state.patch else [],
        has_patch=bool(state.patch),
        report=text_report,
        answer=answer if answer and answer != text_report else None,
    )


def _budgets(state: TaskState) -> list[tuple[str, str, str]]:
    budgets, usage = state.task.budgets, state.usage
    wall = usage.wall_s or (state.updated_at - state.created_at).total_seconds()
    rows = [
        ("model requests", str(usage.requests), str(budgets.max_steps)),
        ("tokens", f"{usage.tokens:,}", f"{budgets.max_tokens:,}"),
        ("revisions", str(state.revisions), str(budgets.max_revisions)),
        ("tool calls", str(usage.tool_calls), ""),
        ("wall clock", f"{wall:.1f} s", f"{budgets.deadline_s:.0f} s"),
    ]
    cost_limit = f"${budgets.max_cost_usd:.2f}" if budgets.max_cost_usd is not None else ""
    rows.append(("cost", _cost(usage.cost_usd), cost_limit))
    return rows


def _age(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def _cost(value: float | None) -> str:
    return "" if value is None else f"${value:.4f}"


def _first_line(text: str, limit: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _basename(path: str) -> str:
    return Path(path).name or path
