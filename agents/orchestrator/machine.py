"""The task's state machine: a pure function from (record, input) to (new record, commands).

Nothing here touches the bus or the clock: the shell (`shell.py`) reads the record, calls
`transition`, compare-and-sets the new record, and only then publishes the commands, so a crash at
any point leaves either the old record (the input is redelivered and handled again) or the new one
with its outbox (republished under the same ids, which JetStream deduplicates).

States (`TaskState.status`):

    submitted ─► planning ─► retrieving ─► coding ─► verifying ─► done
                    ▲                        ▲           │
                    └──── (after two failed  └─revising◄─┤ failed verdict
                           revisions)                    ├─► handed_off  (a limit, or the same
                                                         │                failures twice)
    review stages (any number, after coding):  coding ─► reviewing ─► (next stage)
                    approve: on; request_changes: revising (counted like a failed verdict);
                    reject: failed (review.rejected)
    read mode:  planning ─► retrieving ─► answering ─► verifying ─► done
    no model:   planning ─► retrieving ─► verifying ─► diagnosed
    any state ─► cancelled (cancel) | failed (a step failed for good) | handed_off (a budget)

The table `_HANDLERS` maps each input type to its handler; terminal records ignore every input,
and a result whose step is not the one the record expects is stale and ignored — that is how a
late or duplicate result of a superseded step is recognised.
"""

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from agents.kinds import kind_of_result
from agents.messages import (
    TERMINAL_STATUSES,
    CodeRequest,
    CodeResult,
    Context,
    ContextRequest,
    Plan,
    PlanRequest,
    PlanResult,
    PlanRevision,
    ReviewRequest,
    ReviewResult,
    ReviewRound,
    StepBudget,
    TaskResult,
    TaskState,
    TaskStatus,
    Usage,
    Verification,
    VerifyRequest,
    VerifyResult,
)
from agents.orchestrator.pipeline import Pipeline, Stage
from agents.roles.echo import EchoRequest, EchoResult
from agents.roles.verifier.verdict import revision_feedback
from bus.messages import Message
from redaction import redact, redact_text

REPLAN_AFTER_FAILED_REVISIONS = 2
"""Failed revisions of one plan after which the planner is asked for a new plan."""


# ── inputs ──────────────────────────────────────────────────────────────────────────────────────
@dataclass(frozen=True)
class Start:
    """The record was just created from a submission."""


@dataclass(frozen=True)
class StepDone:
    step_id: str
    role: str
    payload: Message


@dataclass(frozen=True)
class StepFailure:
    step_id: str
    role: str
    failure_class: str
    message: str
    usage: Usage = Usage()


@dataclass(frozen=True)
class Cancel:
    reason: str


Input = Start | StepDone | StepFailure | Cancel


# ── commands ────────────────────────────────────────────────────────────────────────────────────
@dataclass(frozen=True)
class Dispatch:
    """Send `payload` to the workers of `role`."""

    role: str
    step_id: str
    payload: Message


@dataclass(frozen=True)
class Emit:
    """Publish an event on the task's event stream."""

    name: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Finish:
    """Publish the task's result: its stream ends here."""

    result: TaskResult


Command = Dispatch | Emit | Finish


@dataclass(frozen=True)
class Outcome:
    state: TaskState
    commands: tuple[Command, ...] = ()
    ignored: str | None = None
    """Why the input changed nothing (stale step, terminal task); None when it was applied."""


# ── the transition function ─────────────────────────────────────────────────────────────────────
def transition(state: TaskState, event: Input, *, pipeline: Pipeline, now: datetime) -> Outcome:
    """Apply `event` to `state`. Pure: the same inputs give the same outcome."""
    if state.status in TERMINAL_STATUSES:
        return Outcome(state, ignored=f"the task is {state.status} already")
    handler = _HANDLERS[type(event)]
    return _redacted(handler(state, event, pipeline, now))


def _redacted(outcome: Outcome) -> Outcome:
    """What leaves the orchestrator (events, the result, the result kept on the record) with
    secrets masked: plans, answers and reports carry model output, which may quote one.

    The patch stays as computed: it is the artifact `--apply` writes, and the verifier already
    fails a patch that adds a secret."""
    state = outcome.state
    result = _redacted_result(state.result) if state.result is not None else None
    if result is not None:
        state = state.model_copy(update={"result": result})
    commands: list[Command] = []
    for command in outcome.commands:
        if isinstance(command, Emit):
            command = Emit(
                command.name, redact_text(command.message), redact(command.data, max_string=_WHOLE)
            )
        elif isinstance(command, Finish):  # the result on the record, redacted once for both
            command = Finish(result or _redacted_result(command.result))
        commands.append(command)
    return Outcome(state, tuple(commands), outcome.ignored)


_WHOLE = 10**9
"""No string is summarised instead of redacted: events and results keep their whole texts."""


def _redacted_result(result: TaskResult) -> TaskResult:
    fields = redact(result.model_dump(mode="json", exclude={"patch"}), max_string=_WHOLE)
    return TaskResult.model_validate({**fields, "patch": result.patch})


def _on_start(state: TaskState, _: Start, pipeline: Pipeline, now: datetime) -> Outcome:
    if state.status != "submitted" or state.expected_step is not None:
        return Outcome(state, ignored="the task was started already")
    submitted = Emit(
        "transition",
        f"task submitted: {' '.join(state.task.text.split())[:80]}",
        {"status": "submitted", "mode": state.task.mode, "pipeline": pipeline.name, "role": "orchestrator"},
    )
    return _enter(state, pipeline, 0, now, [submitted])


def _on_cancel(state: TaskState, event: Cancel, pipeline: Pipeline, now: datetime) -> Outcome:
    return _end(state, "cancelled", None, f"Cancelled: {event.reason}", now, [])


def _on_failure(state: TaskState, event: StepFailure, pipeline: Pipeline, now: datetime) -> Outcome:
    if event.step_id != state.expected_step:
        return Outcome(state, ignored=f"stale failure of step {event.step_id}")
    state = _charge(state, event.role, event.usage, event.step_id)
    status: TaskStatus = "handed_off" if event.failure_class.startswith("budget.") else "failed"
    report = f"The {event.role} could not finish its step ({event.failure_class}): {event.message}"
    return _end(state, status, event.failure_class, report, now, [])


def _on_done(state: TaskState, event: StepDone, pipeline: Pipeline, now: datetime) -> Outcome:
    if event.step_id != state.expected_step:
        return Outcome(state, ignored=f"stale result of step {event.step_id}")
    index = state.stage_index
    if index is None or index >= len(pipeline.stages) or pipeline.stages[index].kind != state.stage:
        # A record written before stages were numbered: the first stage of its kind.
        index = next((i for i, s in enumerate(pipeline.stages) if s.kind == state.stage), None)
    if index is None:
        return Outcome(state, ignored=f"stage {state.stage!r} is not in pipeline {pipeline.name}")
    stage = pipeline.stages[index]
    apply = _APPLY.get(type(event.payload))
    answered = kind_of_result(type(event.payload))
    if apply is None or answered is None or answered.name != stage.kind:
        return Outcome(state, ignored=f"a {type(event.payload).__name__} does not answer stage {stage.kind}")
    usage = getattr(event.payload, "usage", Usage())
    state = _charge(state, event.role, usage, event.step_id)
    outcome = apply(state, event.payload, pipeline, index, now)
    return replace(outcome, commands=tuple(_of_step(c, event) for c in outcome.commands))


def _of_step(command: Command, event: StepDone) -> Command:
    """A stage's own event (plan, retrieval, code, verification) names the role and the step whose
    result it reports; transitions and the result name theirs already."""
    if isinstance(command, Emit) and command.name in STAGE_EVENTS:
        return Emit(
            command.name, command.message, {**command.data, "role": event.role, "step_id": event.step_id}
        )
    return command


STAGE_EVENTS = frozenset({"plan", "retrieval", "code", "review", "verification"})


_HANDLERS: dict[type, Callable[..., Outcome]] = {
    Start: _on_start,
    StepDone: _on_done,
    StepFailure: _on_failure,
    Cancel: _on_cancel,
}


# ── stage results ───────────────────────────────────────────────────────────────────────────────
def _after_plan(
    state: TaskState, result: PlanResult, pipeline: Pipeline, index: int, now: datetime
) -> Outcome:
    history = list(state.plan_history)
    if state.plan is not None:  # a revision: keep the replaced plan with the new one's reason
        history.append(
            PlanRevision(
                plan=state.plan, reason=result.plan.revision_reason or "revised", at_step=state.step_seq
            )
        )
    state = state.model_copy(update={"plan": result.plan, "plan_history": history})
    events = [Emit("plan", _plan_line(result.plan), {"plan": result.plan.model_dump(mode="json")})]
    return _enter(state, pipeline, index + 1, now, events)


def _after_context(
    state: TaskState, result: Context, pipeline: Pipeline, index: int, now: datetime
) -> Outcome:
    state = state.model_copy(update={"context": result})
    files = [{"path": f.path, "score": round(f.score, 4)} for f in result.files[:20]]
    events = [
        Emit("retrieval", f"{len(result.files)} files, {result.tokens} tokens of context", {"files": files})
    ]
    return _enter(state, pipeline, index + 1, now, events)


def _after_code(
    state: TaskState, result: CodeResult, pipeline: Pipeline, index: int, now: datetime
) -> Outcome:
    state = state.model_copy(
        update={
            "patch": result.patch or None,
            "files_changed": list(result.files_changed),
            "answer": result.answer,
            "tool_failures": result.tool_failures,
            "review_feedback": None,  # answered: the next revision's feedback is a new one
        }
    )
    events = [
        Emit(
            "code",
            f"{len(result.files_changed)} files changed" if state.task.mode != "read" else "answer written",
            {"files_changed": result.files_changed, "stopped_by": result.stopped_by},
        )
    ]
    if result.stopped_by:
        report = f"The coder stopped ({result.stopped_by}): {result.message}"
        status: TaskStatus = "handed_off"
        return _end(state, status, result.stopped_by, report, now, events)
    return _enter(state, pipeline, index + 1, now, events)


def _after_verify(
    state: TaskState, result: VerifyResult, pipeline: Pipeline, index: int, now: datetime
) -> Outcome:
    report = result.report
    state = state.model_copy(update={"last_report": report, "baseline": result.baseline or state.baseline})
    events = [
        Emit(
            "verification",
            f"verdict {report.verdict}: {len(report.failures)} failures",
            {"verdict": report.verdict, "checks": [c.model_dump(mode="json") for c in report.checks]},
        )
    ]
    if pipeline.stage("code") is None:  # diagnose: nothing was changed, the report is the answer
        return _end(state, "diagnosed", None, _diagnosis(state), now, events)
    if report.verdict != "failed":
        return _enter(state, pipeline, index + 1, now, events)
    signature = _signature(report)
    if state.failure_signatures and state.failure_signatures[-1] == signature:
        cls = report.failures[0].failure_class if report.failures else "verify.failed"
        return _end(state, "handed_off", cls, "The same failures came back after a revision.", now, events)
    state = state.model_copy(update={"failure_signatures": [*state.failure_signatures, signature]})
    if state.revisions >= state.task.budgets.max_revisions:
        return _end(state, "handed_off", "budget.revisions", "The revision budget is used up.", now, events)
    state = state.model_copy(
        update={
            "revisions": state.revisions + 1,
            "failed_revisions_since_plan": state.failed_revisions_since_plan + 1,
        }
    )
    events.append(
        Emit("transition", f"revising ({state.revisions})", {"status": "revising", "role": "orchestrator"})
    )
    if (
        state.failed_revisions_since_plan > REPLAN_AFTER_FAILED_REVISIONS
        and pipeline.index("plan") is not None
    ):
        state = state.model_copy(update={"failed_revisions_since_plan": 0})
        return _enter(state, pipeline, pipeline.index("plan") or 0, now, events)
    return _enter(state, pipeline, pipeline.index("code") or 0, now, events)


def _after_review(
    state: TaskState, result: ReviewResult, pipeline: Pipeline, index: int, now: datetime
) -> Outcome:
    role = pipeline.stages[index].role
    review = ReviewRound(
        step_id=result.step_id,
        role=role,
        verdict=result.verdict,
        findings=list(result.findings),
        feedback=result.feedback,
    )
    state = state.model_copy(update={"reviews": [*state.reviews, review]})
    findings = [f.model_dump(mode="json", exclude_none=True) for f in result.findings]
    events: list[Command] = [
        Emit(
            "review",
            f"{role}: {result.verdict}, {len(result.findings)} findings",
            {"verdict": result.verdict, "findings": findings, "feedback": result.feedback},
        )
    ]
    if result.verdict == "approve":
        return _enter(state, pipeline, index + 1, now, events)
    if result.verdict == "reject":
        lines = [f"The {role} rejected the change: {result.feedback or 'no reason given'}"]
        lines += [f"  - {_finding_line(f)}" for f in result.findings[:20]]
        return _end(state, "failed", "review.rejected", "\n".join(lines), now, events)
    code = pipeline.index("code")
    if code is None or code > index:  # unreachable for a checked pipeline: review needs a code stage
        return _end(
            state,
            "failed",
            "review.rejected",
            f"The {role} requested changes, but nothing codes.",
            now,
            events,
        )
    if state.revisions >= state.task.budgets.max_revisions:
        return _end(state, "handed_off", "budget.revisions", "The revision budget is used up.", now, events)
    state = state.model_copy(
        update={"revisions": state.revisions + 1, "review_feedback": _review_feedback(role, result)}
    )
    events.append(
        Emit(
            "transition",
            f"revising ({state.revisions}): {role} requested changes",
            {"status": "revising", "role": "orchestrator", "requested_by": role},
        )
    )
    return _enter(state, pipeline, code, now, events)


def _review_feedback(role: str, result: ReviewResult) -> str:
    lines = [f"The {role} reviewed the patch and requested changes."]
    if result.feedback:
        lines.append(result.feedback)
    lines += [f"- {_finding_line(f)}" for f in result.findings[:20]]
    return "\n".join(lines)


def _finding_line(finding: Any) -> str:
    where = finding.path + (f":{finding.line}" if finding.line else "") + ": " if finding.path else ""
    rule = f" [{finding.rule}]" if finding.rule else ""
    return f"{where}{finding.message}{rule}"


def _after_echo(
    state: TaskState, result: EchoResult, pipeline: Pipeline, index: int, now: datetime
) -> Outcome:
    state = state.model_copy(update={"answer": result.text})
    return _enter(state, pipeline, index + 1, now, [])


_APPLY: dict[type, Callable[..., Outcome]] = {
    PlanResult: _after_plan,
    Context: _after_context,
    CodeResult: _after_code,
    VerifyResult: _after_verify,
    ReviewResult: _after_review,
    EchoResult: _after_echo,
}
"""How the task moves on from each kind's result (`agents/kinds.py` says which kind answers with it)."""


# ── entering a stage ────────────────────────────────────────────────────────────────────────────
def _enter(state: TaskState, pipeline: Pipeline, index: int, now: datetime, events: list[Command]) -> Outcome:
    if index >= len(pipeline.stages):
        return _end(state, "done", None, _summary(state), now, events)
    stage = pipeline.stages[index]
    limit = _limit_reached(state, stage, now)
    if limit is not None:
        return _end(state, "handed_off", limit, _limit_text(limit), now, events)
    step_id = f"{state.step_seq + 1:02d}-{stage.kind}"
    state = state.model_copy(
        update={
            "status": stage.status,
            "stage": stage.kind,
            "expected_step": step_id,
            "stage_index": index,
            "stage_role": stage.role,
            "waiting_for": None,
            "step_seq": state.step_seq + 1,
            "updated_at": now,
        }
    )
    request = _request(state, stage, step_id)
    transition_event = Emit(
        "transition",
        f"{stage.status} ({stage.role}, step {step_id})",
        {"status": stage.status, "stage": stage.kind, "role": stage.role, "step_id": step_id},
    )
    return Outcome(state, (*events, transition_event, Dispatch(stage.role, step_id, request)))


def _request(state: TaskState, stage: Stage, step_id: str) -> Message:
    task = state.task
    plan = state.plan or Plan()
    if stage.kind == "plan":
        revising = state.plan is not None
        return PlanRequest(
            step_id=step_id,
            task=task,
            budget=_budget(state),
            previous=state.plan if revising else None,
            feedback=_feedback(state) if revising else None,
        )
    if stage.kind == "retrieve":
        return ContextRequest(step_id=step_id, task=task, plan=plan)
    if stage.kind == "code":
        return CodeRequest(
            step_id=step_id,
            task=task,
            plan=plan,
            context=state.context or Context(step_id=""),
            budget=_budget(state),
            previous_patch=state.patch if state.revisions else None,
            feedback=(state.review_feedback or _feedback(state)) if state.revisions else None,
        )
    if stage.kind == "review":
        done = sum(1 for r in state.reviews if r.role == stage.role)
        return ReviewRequest(
            step_id=step_id,
            task=task,
            plan=plan,
            context=state.context or Context(step_id=""),
            patch=state.patch,
            files_changed=list(state.files_changed),
            answer=state.answer,
            report=state.last_report,
            round=done + 1,
            budget=_budget(state),
        )
    if stage.kind == "verify":
        return VerifyRequest(
            step_id=step_id,
            task=task,
            plan=plan,
            patch=state.patch,
            answer=state.answer if task.mode == "read" else None,
            baseline=state.baseline,
            deadline_at=_deadline(state),
            raised_before=list(state.context.raised) if state.context and task.mode == "execute" else [],
        )
    return EchoRequest(text=task.text)


def _budget(state: TaskState) -> StepBudget:
    budgets = state.task.budgets
    cost_left = None
    if budgets.max_cost_usd is not None:
        cost_left = max(0.0, budgets.max_cost_usd - (state.usage.cost_usd or 0.0))
    return StepBudget(
        requests=max(0, budgets.max_steps - state.usage.requests),
        tokens=max(0, budgets.max_tokens - state.usage.tokens),
        deadline_at=_deadline(state),
        cost_usd=cost_left,
        max_tool_failures=budgets.max_tool_failures,
        max_repeated_calls=budgets.max_repeated_calls,
    )


def _deadline(state: TaskState) -> datetime:
    return state.created_at + timedelta(seconds=state.task.budgets.deadline_s)


def _limit_reached(state: TaskState, stage: Stage, now: datetime) -> str | None:
    """The budget that forbids entering `stage`, checked before every step (model steps use the
    model budgets; every step the clock)."""
    if now >= _deadline(state):
        return "budget.wall"
    if stage.kind not in ("plan", "code") or not state.task.models.for_role(stage.role):
        return None
    budgets = state.task.budgets
    if state.usage.requests >= budgets.max_steps:
        return "budget.steps"
    if state.usage.tokens >= budgets.max_tokens:
        return "budget.tokens"
    if budgets.max_cost_usd is not None and (state.usage.cost_usd or 0.0) >= budgets.max_cost_usd:
        return "budget.cost"
    return None


def _charge(state: TaskState, role: str, usage: Usage, step_id: str) -> TaskState:
    by_role = dict(state.by_role)
    by_role[role] = by_role.get(role, Usage()).plus(usage)
    return state.model_copy(
        update={
            "usage": state.usage.plus(usage),
            "by_role": by_role,
            "steps_done": [*state.steps_done, step_id],
            "expected_step": None,
        }
    )


# ── ending ──────────────────────────────────────────────────────────────────────────────────────
def _end(
    state: TaskState,
    status: TaskStatus,
    failure_class: str | None,
    report: str,
    now: datetime,
    events: list[Command],
) -> Outcome:
    if status == "handed_off":
        report = _handoff_report(state, failure_class, report)
    state = state.model_copy(update={"status": status, "expected_step": None, "updated_at": now})
    result = build_result(state, failure_class=failure_class, report=report, now=now)
    state = state.model_copy(update={"result": result})
    final = Emit(
        "transition",
        f"task {status}" + (f" ({failure_class})" if failure_class else ""),
        {"status": status, "failure_class": failure_class, "role": "orchestrator"},
    )
    if status != "handed_off":
        return Outcome(state, (*events, final, Finish(result)))
    hand_off = Emit(
        "hand_off",
        report.splitlines()[0],
        {
            "role": "orchestrator",
            "failure_class": failure_class,
            "report": report,
            "files_changed": list(state.files_changed),
            "partial_patch": bool(state.patch),
            "steps_done": list(state.steps_done),
        },
    )
    return Outcome(state, (*events, final, hand_off, Finish(result)))


def build_result(state: TaskState, *, failure_class: str | None, report: str, now: datetime) -> TaskResult:
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
    )
    usage: dict[str, Any] = state.usage.model_dump(mode="json")
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
        usage=usage,
        report=report,
        trace_id=state.trace_id,
    )


def _summary(state: TaskState) -> str:
    lines = []
    if state.task.mode == "read":
        lines.append("Answered.")
    elif state.files_changed:
        lines.append(f"Patch changing {', '.join(state.files_changed)}.")
    else:
        lines.append("No change was needed.")
    if state.last_report is not None:
        lines.append(f"Verification: {state.last_report.verdict}.")
        if state.last_report.verdict == "unverified":
            lines.append("Nothing could check this result: review it before relying on it.")
    if state.revisions:
        lines.append(f"{state.revisions} revision(s).")
    return " ".join(lines)


def _diagnosis(state: TaskState) -> str:
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
        failing = [f for f in report.failures if f.test_id]
        if failing:
            lines.append("Failing now: " + "; ".join(_where(f) for f in failing[:10]) + ".")
        elif report.verdict == "unverified":
            lines.append("No tests could be run on the tree.")
        else:
            lines.append("The tests pass on the unmodified tree.")
    lines.append(
        "With a model (--model or CODELOOP_MODEL), the coder would be asked to make the change in a "
        "scratch copy of these files and the verifier to check it against these tests."
    )
    return "\n".join(lines)


def _where(failure: Any) -> str:
    place = f" ({failure.path}:{failure.line})" if failure.path and failure.line else ""
    return f"{failure.test_id}{place}"


def _handoff_report(state: TaskState, failure_class: str | None, reason: str) -> str:
    lines = [f"Handed off to a person: {reason} [{failure_class}]"]
    if state.plan and state.plan.steps:
        lines.append("Plan:")
        lines += [f"  - {s.description}" for s in state.plan.steps]
    lines.append(
        f"Done: {len(state.steps_done)} steps ({', '.join(state.steps_done) or 'none'}), "
        f"{state.usage.requests} model requests, {state.revisions} revisions."
    )
    if state.files_changed:
        lines.append("Partial patch touches: " + ", ".join(state.files_changed))
    if state.last_report and state.last_report.failures:
        lines.append("Remaining failures:")
        lines += [f"  - {f.failure_class}: {f.message[:200]}" for f in state.last_report.failures[:10]]
    return "\n".join(lines)


def _limit_text(limit: str) -> str:
    return {
        "budget.wall": "The task's deadline passed.",
        "budget.steps": "The step budget (model requests) is used up.",
        "budget.tokens": "The token budget is used up.",
        "budget.cost": "The cost budget is used up.",
    }.get(limit, limit)


def _feedback(state: TaskState) -> str | None:
    """The verifier's failures for the coder (or planner): failing test ids and places first."""
    report = state.last_report
    if report is None or not report.failures:
        return None
    return revision_feedback(report)


def _signature(report: Any) -> str:
    return "|".join(sorted(f"{f.failure_class}:{f.test_id}:{f.path}" for f in report.failures))


def _plan_line(plan: Plan) -> str:
    first = plan.steps[0].description if plan.steps else "no steps"
    return f"plan of {len(plan.steps)} steps: {first[:100]}" + (
        f" (revised: {plan.revision_reason[:100]})" if plan.revision_reason else ""
    )
