"""The task's state machine: a pure function from (record, input) to (new record, commands).

Nothing here touches the bus or the clock: the shell (`shell.py`) reads the record, calls
`transition`, compare-and-sets the new record, and only then publishes the commands, so a crash at
any point leaves either the old record (the input is redelivered and handled again) or the new one
with its outbox (republished under the same ids, which JetStream deduplicates).

States (`TaskState.status`): the machine's own are `submitted`, `revising` (told in an event
when a judgement sends the patch back) and the terminal ones; while a stage runs, the task shows
the status its kind declares (`StageKind.statuses`), so the standard pipelines read

    submitted ─► planning ─► retrieving ─► coding ─► verifying ─► done
                    ▲                        ▲           │
                    └──── (after two failed  └─revising◄─┤ failed verdict
                           revisions)                    ├─► handed_off  (a limit, or the same
                                                         │                failures twice)
    several attempts (`budgets.attempts`, a select stage last):
                coding ─► verifying ─► coding ─► verifying ... ─► selecting ─► done
                (each attempt from the starting tree; a failed one is kept, not revised; a
                chosen attempt that failed is revised: revising ─► coding ─► ... ─► selecting)
    read mode:  planning ─► retrieving ─► answering ─► verifying ─► done
    no model:   planning ─► retrieving ─► verifying ─► diagnosed
    any state ─► cancelled (cancel) | failed (a step failed for good) | handed_off (a budget)

and a pipeline with other stages (`review:security-reviewer`, a plug-in kind's) shows theirs in
between; what each kind's result does is in its module (`stages/review.py`: approve, request
changes, reject).

The machine owns the transitions, the budgets and the end; what a stage sends and how its result
moves the task on belong to the stage's kind (`stages/`), which answers with a reaction the
machine carries out. A kind may also redirect the task just before its stage is entered
(`StageKind.before`: the select kind sends it back to the code stage for the next attempt). The table `_HANDLERS` maps each input type to its handler; terminal records
ignore every input, and a result whose step is not the one the record expects is stale and
ignored — that is how a late or duplicate result of a superseded step is recognised.
"""

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from agents.messages import TERMINAL_STATUSES, EndStatus, TaskResult, TaskState, Usage
from agents.orchestrator.io import (
    Cancel,
    Command,
    Dispatch,
    Emit,
    Finish,
    Input,
    Outcome,
    Start,
    StepDone,
    StepFailure,
)
from agents.orchestrator.pipeline import Pipeline, Stage
from agents.orchestrator.report import build_result, handoff_report, limit_text, summary
from agents.orchestrator.stages.kind import Advance, At, End, Reaction, Revisit, deadline_of, model_limit
from redaction import redact, redact_text


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
        {
            "status": "submitted",
            "mode": state.task.mode,
            "pipeline": pipeline.name,
            "role": "orchestrator",
            "config_revision": state.config_revision,
            "principal": state.principal,
        },
    )
    return _enter(state, pipeline, 0, now, (submitted,))


def _on_cancel(state: TaskState, event: Cancel, pipeline: Pipeline, now: datetime) -> Outcome:
    return _end(state, "cancelled", None, f"Cancelled: {event.reason}", now, ())


def _on_failure(state: TaskState, event: StepFailure, pipeline: Pipeline, now: datetime) -> Outcome:
    if event.step_id != state.expected_step:
        return Outcome(state, ignored=f"stale failure of step {event.step_id}")
    state = _charge(state, event.role, event.usage, event.step_id)
    status: EndStatus = "handed_off" if event.failure_class.startswith("budget.") else "failed"
    report = f"The {event.role} could not finish its step ({event.failure_class}): {event.message}"
    failure_class, report = _as_quota(state, event.failure_class, report)
    return _end(state, status, failure_class, report, now, ())


def _as_quota(state: TaskState, failure_class: str | None, report: str) -> tuple[str | None, str]:
    """A step stopped by its token or cost limit where that limit was the principal's quota (the
    step's budget is the smaller of the two, `step_budget`) ended the task by `budget.quota`."""
    if failure_class not in ("budget.tokens", "budget.cost") or not quota_reached(state):
        return failure_class, report
    budgets = state.task.budgets
    own_reached = state.usage.tokens >= budgets.max_tokens or (
        budgets.max_cost_usd is not None and (state.usage.cost_usd or 0.0) >= budgets.max_cost_usd
    )
    return (failure_class, report) if own_reached else ("budget.quota", limit_text("budget.quota", state))


def _on_done(state: TaskState, event: StepDone, pipeline: Pipeline, now: datetime) -> Outcome:
    if event.step_id != state.expected_step:
        return Outcome(state, ignored=f"stale result of step {event.step_id}")
    index = state.stage_index
    if index is None or index >= len(pipeline.stages) or pipeline.stages[index].kind != state.stage:
        # A record written before stages were numbered: the first stage of its kind.
        index = pipeline.index(state.stage or "")
    if index is None:
        return Outcome(state, ignored=f"stage {state.stage!r} is not in pipeline {pipeline.name}")
    stage = pipeline.stages[index]
    if type(event.payload) is not stage.definition.result:
        return Outcome(state, ignored=f"a {type(event.payload).__name__} does not answer stage {stage.kind}")
    usage = getattr(event.payload, "usage", Usage())
    state = _charge(state, event.role, usage, event.step_id)
    reaction = stage.definition.react(state, event.payload, _at(pipeline, index, event.step_id))
    outcome = _carry_out(reaction, pipeline, index, now)
    return replace(outcome, commands=tuple(_of_step(c, stage, event) for c in outcome.commands))


def _carry_out(reaction: Reaction, pipeline: Pipeline, index: int, now: datetime) -> Outcome:
    """What a kind's reaction to its stage's result asks: the next stage, an earlier one, or the end."""
    if isinstance(reaction, Advance):
        return _enter(reaction.state, pipeline, index + 1, now, reaction.events)
    if isinstance(reaction, Revisit):
        return _enter(reaction.state, pipeline, reaction.index, now, reaction.events)
    if isinstance(reaction, End):  # pyright: ignore[reportUnnecessaryIsInstance] - a plug-in kind may react with anything at run time
        if reaction.status not in TERMINAL_STATUSES:  # a plug-in's End may carry any string at run time
            raise TypeError(f"a stage kind ended the task with {reaction.status!r}, not a terminal status")
        failure_class, report = _as_quota(reaction.state, reaction.failure_class, reaction.report)
        return _end(reaction.state, reaction.status, failure_class, report, now, reaction.events)
    raise TypeError(f"a stage kind reacted with {type(reaction).__name__}, not Advance, Revisit or End")


def _of_step(command: Command, stage: Stage, event: StepDone) -> Command:
    """A stage's own event (plan, retrieval, code, verification, ...) names the role and the step
    whose result it reports; transitions and the result name theirs already."""
    if isinstance(command, Emit) and command.name == stage.definition.event:
        return Emit(
            command.name, command.message, {**command.data, "role": event.role, "step_id": event.step_id}
        )
    return command


def _at(pipeline: Pipeline, index: int, step_id: str) -> At:
    return At(index=index, role=pipeline.stages[index].role, step_id=step_id, kinds=pipeline.kinds)


_HANDLERS: dict[type, Callable[..., Outcome]] = {
    Start: _on_start,
    StepDone: _on_done,
    StepFailure: _on_failure,
    Cancel: _on_cancel,
}


# ── entering a stage ────────────────────────────────────────────────────────────────────────────
def _enter(
    state: TaskState, pipeline: Pipeline, index: int, now: datetime, events: tuple[Command, ...]
) -> Outcome:
    if index >= len(pipeline.stages):
        return _end(state, "done", None, summary(state), now, events)
    stage = pipeline.stages[index]
    if stage.definition.before is not None:
        instead = stage.definition.before(state, _at(pipeline, index, ""))
        if instead is not None:
            return _enter(instead.state, pipeline, instead.index, now, (*events, *instead.events))
    limit = _limit_reached(state, stage, now)
    if limit is not None:
        return _end(state, "handed_off", limit, limit_text(limit, state), now, events)
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
    request = stage.definition.build(state, _at(pipeline, index, step_id))
    transition_event = Emit(
        "transition",
        f"{stage.status} ({stage.role}, step {step_id})",
        {"status": stage.status, "stage": stage.kind, "role": stage.role, "step_id": step_id},
    )
    return Outcome(state, (*events, transition_event, Dispatch(stage.role, step_id, request)))


def _limit_reached(state: TaskState, stage: Stage, now: datetime) -> str | None:
    """The budget that forbids entering `stage`, checked before every step (model steps use the
    model budgets; every step the clock)."""
    if now >= deadline_of(state):
        return "budget.wall"
    if quota_reached(state):  # a principal's quota stops every stage: nothing more runs on it
        return "budget.quota"
    if not stage.definition.model_budgets or not state.task.models.for_role(stage.role):
        return None
    return model_limit(state)


def quota_reached(state: TaskState) -> bool:
    """True when the principal's daily quota is used up: its other tasks' use plus this task's."""
    quota = state.quota
    if quota is None:
        return False
    if quota.tokens_per_day is not None and quota.others_tokens + state.usage.tokens >= quota.tokens_per_day:
        return True
    cost = quota.others_cost_usd + (state.usage.cost_usd or 0.0)
    return quota.cost_per_day_usd is not None and cost >= quota.cost_per_day_usd


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
    status: EndStatus,
    failure_class: str | None,
    report: str,
    now: datetime,
    events: tuple[Command, ...],
) -> Outcome:
    if status == "handed_off":
        report = handoff_report(state, failure_class, report)
    state = state.model_copy(update={"status": status, "expected_step": None, "updated_at": now})
    result = build_result(state, failure_class=failure_class, report=report, now=now)
    state = state.model_copy(update={"result": result})
    final = Emit(
        "transition",
        f"task {status}" + (f" ({failure_class})" if failure_class else ""),
        {
            "status": status,
            "failure_class": failure_class,
            "role": "orchestrator",
            "config_revision": state.config_revision,
        },
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
