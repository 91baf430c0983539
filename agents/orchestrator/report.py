"""How a task's end is told: the result object built from the record, and the report's prose.

`build_result` is the object `codeloop run --json` prints; the functions after it write the
`report` a person reads: the summary of a done task, the diagnosis of a task without a model,
the hand-off report of a task a limit ended, and what each limit means.
"""

import re
from datetime import datetime

from pydantic import JsonValue

from agents.budgets import budget_used_up, quota_used_up
from agents.messages import Candidate, Failure, TaskResult, TaskState, Verification


def build_result(state: TaskState, *, failure_class: str | None, report: str, now: datetime) -> TaskResult:
    """The task's result as the record holds it at its end."""
    plan = state.plan.model_dump(mode="json") if state.plan else {}
    if plan or state.plan_history:
        plan["revisions"] = [
            {"reason": r.reason, "at_step": r.at_step, "steps": [s.description for s in r.plan.steps]}
            for r in state.plan_history
        ]
    last = state.last_report
    verification = Verification(
        verdict=last.verdict if last else None,
        checks=[c.model_dump(mode="json") for c in last.checks] if last else [],
        failures=list(last.failures) if last else [],
        evidence=list(last.evidence) if last else [],
        preexisting=list(last.preexisting) if last else [],
        environment=last.environment if last else None,
    )
    usage: dict[str, JsonValue] = state.usage.model_dump(mode="json")
    usage["wall_s"] = round((now - state.created_at).total_seconds(), 3)
    usage["by_role"] = {role: u.model_dump(mode="json") for role, u in state.by_role.items()}
    answer = state.answer
    if state.status in ("diagnosed", "handed_off") and not answer:
        answer = report
    return TaskResult(
        task_id=state.task_id,
        status=state.status,
        mode=state.task.mode,
        answer=answer,
        patch=state.patch if state.task.mode != "read" else None,
        files_changed=state.files_changed if state.task.mode != "read" else [],
        plan=plan,
        context={"files": [f.path for f in state.context.files]} if state.context else {"files": []},
        verification=verification,
        failure_class=failure_class,
        steps=state.usage.requests,
        revisions=state.revisions,
        reviews=list(state.reviews),
        approvals=list(state.approvals),
        candidates=candidates(state),
        usage=usage,
        report=report,
        trace_id=state.trace_id,
        parent_task_id=state.task.continuation.parent_task_id if state.task.continuation else None,
        config_revision=state.config_revision,
    )


def candidates(state: TaskState) -> list[Candidate]:
    """Every attempt the task judged, with which one was chosen and why (empty with one attempt)."""
    selection = state.selection
    order = list(selection.order) if selection else []
    shown: list[Candidate] = []
    for attempt in state.candidates:
        report = attempt.report
        chosen = selection is not None and selection.chosen == attempt.attempt
        if chosen and selection is not None:
            reason = selection.reason
        elif attempt.attempt in order:
            reason = f"ranked {order.index(attempt.attempt) + 1} of {len(order)}"
        else:
            reason = "not chosen" if selection is not None else ""
        shown.append(
            Candidate(
                attempt=attempt.attempt,
                patch=attempt.patch or "",
                verdict=report.verdict if report else None,
                evidence=list(report.evidence) if report else [],
                cluster=selection.clusters.get(attempt.attempt) if selection else None,
                chosen=chosen,
                reason=reason,
                evidence_kind=report.evidence_kind if report else "none",
                files_changed=list(attempt.files_changed),
                summary=report.summary if report else "",
                revision_of=attempt.revision_of,
            )
        )
    return shown


_CHANGE_VERBS = (
    "fix|change|add|remove|delete|rename|refactor|implement|update|replace|correct|make|write|create|"
    "modify|rewrite|move|bump|upgrade|patch|repair|edit|resolve"
)
_ASKS_FOR_CHANGE = re.compile(
    rf"(?:^|[.!?:;]\s+|\n\s*|\bplease\s+|\b(?:can|could|would|will)\s+you\s+)(?:{_CHANGE_VERBS})\b(?!\s*\()",
    re.IGNORECASE,
)
READ_MODE_HINT = (
    "The task asks for a change, but read mode only answers and changes nothing: run it again in "
    "write mode (`--mode write`) for a patch, or execute mode (`--mode execute`) to also run the tests."
)


def asks_for_change(text: str) -> bool:
    """True when the task's words ask for a change: a sentence that starts with (or a `please`,
    `can you` before) a verb such as fix, add, remove, rename or implement. A question about code
    (`why does paging skip the last page?`) does not; `add(2, 3)` is a call, not a request."""
    return bool(_ASKS_FOR_CHANGE.search(text.strip()))


def summary(state: TaskState) -> str:
    """The report of a task that went through its whole pipeline."""
    lines: list[str] = []
    if state.task.mode == "read":
        lines.append("Answered.")
        if asks_for_change(state.task.text):
            lines.append(READ_MODE_HINT)
    elif state.files_changed:
        lines.append(f"Patch changing {', '.join(state.files_changed)}.")
    else:
        lines.append("No change was needed.")
    if state.selection is not None:
        lines.append(
            f"Chose attempt {state.selection.chosen} of {len(state.candidates)}: {state.selection.reason}."
        )
    if state.attempts_stopped_by:
        made = sum(1 for c in state.candidates if c.revision_of is None)
        lines.append(
            f"Only {made} of {state.task.budgets.attempts} attempts were made ({state.attempts_stopped_by})."
        )
    if state.last_report is not None:
        lines.append(f"Verification: {state.last_report.verdict}.")
        if state.last_report.verdict == "unverified":
            lines.append("Nothing could check this result: review it before relying on it.")
    if state.revisions:
        lines.append(f"{state.revisions} revision(s).")
    return " ".join(lines)


def diagnosis(state: TaskState) -> str:
    """The report of a task without a model: the relevant files and what fails on the tree."""
    report = state.last_report
    files = [f.path for f in (state.context.files if state.context else [])[:5]]
    lines = [f"Diagnosis (no model configured) of: {state.task.text.strip()[:300]}"]
    if files:
        lines.append("Most relevant files: " + ", ".join(files) + ".")
    if state.context and state.context.raised:
        lines.append(
            "The task's example, run in the sandbox, raised: " + "; ".join(state.context.raised[:3]) + "."
        )
    if report is not None:
        if report.environment is not None:
            env = report.environment
            built = f"built for this task in {env.build_s:.1f} s" if env.built else "from the cache"
            lines.append(
                f"Tests ran in the project environment {env.key[:12]} ({env.source or env.kind}, "
                f"Python {env.python_version}), {built}."
            )
        failing = [f for f in report.failures if f.test_id]
        if failing:
            lines.append("Failing now: " + "; ".join(_where(f) for f in failing[:10]) + ".")
        elif report.verdict == "unverified" and report.failures:
            lines.append(
                f"The tests could not run: {report.failures[0].message} [{report.failures[0].failure_class}]"
            )
        elif report.verdict == "unverified":
            lines.append("No tests could be run on the tree.")
        else:
            lines.append("The tests pass on the unmodified tree.")
    if state.task.mode == "read":
        lines.append(
            "With a model (--model or CODELOOP_MODEL), the coder would answer from these files and the "
            "verifier would check what the answer cites."
        )
        if asks_for_change(state.task.text):
            lines.append(READ_MODE_HINT)
    else:
        lines.append(
            "With a model (--model or CODELOOP_MODEL), the coder would be asked to make the change in a "
            "scratch copy of these files and the verifier to check it against these tests."
        )
    return "\n".join(lines)


def _where(failure: Failure) -> str:
    place = f" ({failure.path}:{failure.line})" if failure.path and failure.line else ""
    return f"{failure.test_id}{place}"


def handoff_report(state: TaskState, failure_class: str | None, reason: str) -> str:
    """The report of a task handed to a person: why, the plan, what was done, what still fails."""
    lines = [f"Handed off to a person: {reason} [{failure_class}]"]
    if state.plan and state.plan.steps:
        lines.append("Plan:")
        lines += [f"  - {s.description}" for s in state.plan.steps]
    lines.append(
        f"Done: {len(state.steps_done)} steps ({', '.join(state.steps_done) or 'none'}), "
        f"{state.usage.requests} model requests, {state.revisions} revisions."
    )
    lines += _attempts_lines(state)
    if state.files_changed:
        lines.append("Partial patch touches: " + ", ".join(state.files_changed))
    if state.last_report and state.last_report.failures:
        lines.append("Remaining failures:")
        lines += [f"  - {f.failure_class}: {f.message[:200]}" for f in state.last_report.failures[:10]]
    lines.append(
        f"To go on from here rather than start over: `codeloop continue {state.task_id}` (fresh "
        "budgets, e.g. --max-steps N; a new instruction in words may follow the id)."
    )
    return "\n".join(lines)


def _attempts_lines(state: TaskState) -> list[str]:
    """What a hand-off report says of a task's attempts: how many were made, and the choice."""
    if not state.candidates:
        return []
    made = sum(1 for c in state.candidates if c.revision_of is None)
    stopped = f" ({state.attempts_stopped_by} stopped them)" if state.attempts_stopped_by else ""
    verdicts = ", ".join(
        f"{c.attempt}: {c.report.verdict if c.report else 'not verified'}" for c in state.candidates
    )
    lines = [f"Attempts: {made} of {state.task.budgets.attempts} made{stopped}; verdicts {verdicts}."]
    if state.selection is not None:
        lines.append(f"Chosen: attempt {state.selection.chosen}, {state.selection.reason}.")
    return lines


def limit_text(limit: str, state: TaskState) -> str:
    """What the budget `limit` (a `budget.*` failure class) ending the task means, with what the
    task used and how to raise it (`agents.budgets`)."""
    used: dict[str, float | None] = {
        "budget.steps": state.usage.requests,
        "budget.tokens": state.usage.tokens,
        "budget.cost": state.usage.cost_usd,
        "budget.revisions": state.revisions,
    }
    if limit == "budget.quota" and state.quota is not None:
        return quota_used_up(state.quota, state.usage)
    return budget_used_up(limit, state.task.budgets, used=used.get(limit))
