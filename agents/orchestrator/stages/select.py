"""The `select` kind: choose one of the task's attempts (`budgets.attempts`).

Each time the task reaches the select stage, the attempt that just went through the stages
before it (its patch and its verification) is kept as a candidate (`before`). While fewer attempts
than asked for were made, and the model budgets allow another, the task goes back to the code
stage for the next attempt from the starting tree; the verifier's baseline of that tree travels on
the record, so every attempt is judged against the same tree without redoing its work. Then the
select role is sent every candidate and answers which one the task goes on with.

The chosen attempt becomes the task's patch and verification. When it failed and revisions are
left, the coder revises it (counted against `budgets.max_revisions`); the revision, once judged,
is one more candidate and the choice is made again. A chosen attempt that is unverified ends the
task handed off when the task requires a verified patch, as the verify kind does.
"""

from agents.budgets import budget_used_up
from agents.messages import (
    Attempt,
    Plan,
    Selection,
    SelectRequest,
    SelectResult,
    TaskState,
    VerificationReport,
)
from agents.orchestrator.io import Emit
from agents.orchestrator.stages.kind import Advance, At, End, Revisit, StageKind, model_limit, step_budget
from agents.orchestrator.stages.verify import failure_signature
from agents.wording import counted


def _before(state: TaskState, at: At) -> Revisit | None:
    """Keep the attempt that just finished; go back for the next one while more are asked for."""
    state, events = _kept(state)
    code = at.index_of("code")
    wanted = state.task.budgets.attempts
    made = sum(1 for c in state.candidates if c.revision_of is None)
    if code is None or state.selection is not None or state.attempts_stopped_by or made >= wanted:
        return Revisit(state, at.index, events) if events else None
    limit = model_limit(state)  # the code stage runs a model: its budgets bind over all attempts
    if limit is not None:
        stopped = state.model_copy(update={"attempts_stopped_by": limit})
        note = Emit(
            "attempts_stopped",
            f"{counted(made, 'attempt')} of {wanted} made: {limit}",
            {"made": made, "wanted": wanted, "failure_class": limit, "role": "orchestrator"},
        )
        return Revisit(stopped, at.index, (*events, note))
    fresh = state.model_copy(
        update={
            "attempt": made + 1,
            "revision_of": None,
            "patch": None,
            "files_changed": [],
            "answer": None,
            "last_report": None,
            "review_feedback": None,
            "failure_signatures": [],
            "approvals": [],  # each attempt's own: a person approved that attempt's change
        }
    )
    start = Emit(
        "transition",
        f"attempt {made + 1} of {wanted}",
        {"status": "coding", "role": "orchestrator", "attempt": made + 1},
    )
    return Revisit(fresh, code, (*events, start))


def _kept(state: TaskState) -> tuple[TaskState, tuple[Emit, ...]]:
    """The record with the current attempt among its candidates (once), and the event telling it."""
    if any(c.attempt == state.attempt for c in state.candidates) or (
        state.attempts_stopped_by and state.last_report is None
    ):
        return state, ()
    attempt = Attempt(
        attempt=state.attempt,
        patch=state.patch,
        files_changed=list(state.files_changed),
        answer=state.answer,
        report=_kept_report(state.last_report),
        approvals=list(state.approvals),
        revision_of=state.revision_of,
    )
    report = state.last_report
    verdict = report.verdict if report else "not verified"
    event = Emit(
        "candidate",
        f"attempt {attempt.attempt}: {verdict}, {counted(len(attempt.files_changed), 'file')} changed",
        {
            "attempt": attempt.attempt,
            "verdict": report.verdict if report else None,
            "evidence": list(report.evidence) if report else [],
            "evidence_kind": report.evidence_kind if report else "none",
            "files_changed": list(attempt.files_changed),
            "revision_of": attempt.revision_of,
            "role": "orchestrator",
        },
    )
    return state.model_copy(update={"candidates": [*state.candidates, attempt]}), (event,)


KEPT_FAILURES = 20
"""Failures kept of each candidate's report: the record, the select request and the result carry
every candidate, and a NATS message is capped (1 MiB by default)."""


def _kept_report(report: VerificationReport | None) -> VerificationReport | None:
    """`report` as a candidate keeps it: what a selector and a revision need (verdict, evidence,
    regressions, behaviour, the first failures), without the list of covering tests."""
    if report is None:
        return None
    return report.model_copy(update={"covering": [], "failures": list(report.failures[:KEPT_FAILURES])})


def _request(state: TaskState, at: At) -> SelectRequest:
    return SelectRequest(
        step_id=at.step_id,
        task=state.task,
        plan=state.plan or Plan(),
        candidates=list(state.candidates),
        budget=step_budget(state),
    )


def _react(state: TaskState, result: SelectResult, at: At) -> Advance | Revisit | End:
    chosen = next((c for c in state.candidates if c.attempt == result.chosen), None)
    if chosen is None:
        known = ", ".join(str(c.attempt) for c in state.candidates)
        why = f"The {at.role} chose attempt {result.chosen}, which is not one of the candidates ({known})."
        return End(state, "failed", "role.malformed", why, ())
    selection = Selection(
        chosen=chosen.attempt,
        reason=result.reason or f"chosen by {at.role}",
        order=list(result.order),
        clusters=dict(result.clusters),
        role=at.role,
    )
    state = state.model_copy(
        update={
            "selection": selection,
            "attempt": chosen.attempt,
            "revision_of": chosen.revision_of,
            "patch": chosen.patch,
            "files_changed": list(chosen.files_changed),
            "answer": chosen.answer,
            "last_report": chosen.report,
            "approvals": list(chosen.approvals),
        }
    )
    told = f"attempt {chosen.attempt} of {len(state.candidates)} chosen: {selection.reason}"
    events = (Emit("selection", told, selection.model_dump(mode="json", exclude={"role"})),)
    report = chosen.report
    if report is None or report.verdict == "passed":
        return Advance(state, events)
    if report.verdict == "unverified":
        if state.task.require_verified:
            why = f"The task requires a verified patch, and the chosen attempt's verification was {report.summary}"
            return End(state, "handed_off", "verify.unverified", why, events)
        return Advance(state, events)
    return _revise(state, at, events)


def _revise(state: TaskState, at: At, events: tuple[Emit, ...]) -> Revisit | End:
    """The chosen attempt failed verification: the coder revises it while revisions are left."""
    code = at.index_of("code")
    if state.revisions >= state.task.budgets.max_revisions or code is None:
        words = budget_used_up("budget.revisions", state.task.budgets, used=state.revisions)
        return End(
            state, "handed_off", "budget.revisions", f"Every attempt failed verification. {words}", events
        )
    revision = state.model_copy(
        update={
            "revisions": state.revisions + 1,
            "attempt": max(c.attempt for c in state.candidates) + 1,
            "revision_of": state.attempt,
            "failed_revisions_since_plan": state.failed_revisions_since_plan + 1,
            "failure_signatures": [failure_signature(state.last_report)] if state.last_report else [],
        }
    )
    revising = Emit(
        "transition",
        f"revising ({revision.revisions}): attempt {state.attempt}, the chosen one, failed verification",
        {"status": "revising", "role": "orchestrator", "attempt": revision.attempt},
    )
    return Revisit(revision, code, (*events, revising))


SELECT = StageKind(
    name="select",
    request=SelectRequest,
    result=SelectResult,
    status="selecting",
    phase=4,
    once=True,
    after=("code",),
    event="selection",
    build=_request,
    react=_react,
    before=_before,
    description="choose one of the task's attempts (budgets.attempts), each verified against the starting tree",
)
