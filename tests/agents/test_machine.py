"""The orchestrator's transition function, exhaustively: every status against every kind of input,
then the paths a task takes (pass, revise, re-plan, hand-off by each budget, stale results)."""

# The tests drive each step to the state they assert and then read its fields: a None there fails
# the test as an assert would, so the checker's Optional rules are off in this file.
# pyright: reportOptionalMemberAccess=false, reportOptionalSubscript=false, reportOptionalOperand=false

from datetime import UTC, datetime, timedelta

import pytest

from agents.failures import FailureClass
from agents.messages import (
    TERMINAL_STATUSES,
    Budgets,
    CodeRequest,
    CodeResult,
    Context,
    ModelNames,
    Plan,
    PlanRequest,
    PlanResult,
    PlanStep,
    TaskState,
    TaskSubmitted,
    Usage,
    VerifyRequest,
    VerifyResult,
)
from agents.messages.verification import Failure, VerificationReport
from agents.orchestrator.io import Cancel, Dispatch, Finish, Start, StepDone, StepFailure
from agents.orchestrator.machine import transition
from agents.orchestrator.pipeline import DIAGNOSE, EXPLAIN, FIX, pipeline_for
from agents.orchestrator.stages import known_statuses
from agents.roles.echo import EchoResult

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MODELS = ModelNames(default="function:/x.py:f")


def _awaited(state: TaskState) -> str:
    """The id of the step `state` waits for (the tests drive it only while it waits for one)."""
    assert state.expected_step is not None
    return state.expected_step


def _task(mode: str = "write", **budgets: object) -> TaskSubmitted:
    return TaskSubmitted(text="fix it", repo="/r", mode=mode, models=MODELS, budgets=Budgets(**budgets))  # type: ignore[arg-type] - mode and budgets are literals of each test, validated by pydantic


def _state(task: TaskSubmitted | None = None) -> TaskState:
    return TaskState(task_id="t1", status="submitted", task=task or _task(), created_at=T0, updated_at=T0)


def _step(state: TaskState, payload, *, role: str = "x", now: datetime = T0, pipeline=FIX):
    assert state.expected_step is not None
    return transition(state, StepDone(_awaited(state), role, payload), pipeline=pipeline, now=now)


def _dispatched(outcome):
    return [c for c in outcome.commands if isinstance(c, Dispatch)]


def _report(verdict: str, *failures: Failure) -> VerificationReport:
    return VerificationReport(verdict=verdict, failures=list(failures))  # type: ignore[arg-type] - verdict is one of the literals, given by each test


def _fail(test_id: str = "tests/test_a.py::test_x") -> Failure:
    return Failure(
        failure_class="test.still_failing",  # pyright: ignore[reportArgumentType] - pydantic turns the value into its FailureClass member
        test_id=test_id,
        path="tests/test_a.py",
        line=3,
        message="boom",
    )


def _to_verifying(task: TaskSubmitted | None = None) -> TaskState:
    state = transition(_state(task), Start(), pipeline=FIX, now=T0).state
    state = _step(
        state,
        PlanResult(
            step_id=_awaited(state),
            plan=Plan(steps=[PlanStep(description="s")]),
            usage=Usage(requests=1, input_tokens=10),
        ),
    ).state
    state = _step(state, Context(step_id=_awaited(state))).state
    state = _step(
        state,
        CodeResult(
            step_id=_awaited(state),
            patch="diff",
            files_changed=["a.py"],
            usage=Usage(requests=2, input_tokens=20),
        ),
    ).state
    assert state.status == "verifying"
    return state


# ── every status × every input ─────────────────────────────────────────────────────────────────
ALL_STATUSES: tuple[str, ...] = known_statuses()
"""The machine's statuses and those the installed stage kinds declare."""
INPUTS = {
    "start": lambda s: Start(),
    "current_result": lambda s: StepDone(
        s.expected_step or "none", "x", PlanResult(step_id="p", plan=Plan())
    ),
    "stale_result": lambda s: StepDone("00-old", "x", PlanResult(step_id="00-old", plan=Plan())),
    "current_failure": lambda s: StepFailure(s.expected_step or "none", "x", "env.infra", "down"),
    "stale_failure": lambda s: StepFailure("00-old", "x", "env.infra", "down"),
    "cancel": lambda s: Cancel("user"),
}


@pytest.mark.parametrize("status", ALL_STATUSES)
@pytest.mark.parametrize("kind", list(INPUTS))
def test_every_status_answers_every_input_kind(status: str, kind: str) -> None:
    """The table is total: terminal records ignore everything; live ones cancel, ignore stale
    inputs, and act on the step they expect."""
    state = _state().model_copy(
        update={
            "status": status,
            "stage": "plan",
            "expected_step": None if status == "submitted" else "05-plan",
        }
    )
    outcome = transition(state, INPUTS[kind](state), pipeline=FIX, now=T0)
    if status in TERMINAL_STATUSES:
        assert outcome.ignored and outcome.state == state and not outcome.commands
    elif kind == "cancel":
        assert outcome.state.status == "cancelled" and isinstance(outcome.commands[-1], Finish)
    elif kind in ("stale_result", "stale_failure"):
        assert outcome.ignored and "stale" in outcome.ignored and outcome.state == state
    elif kind == "start":
        if status == "submitted":
            assert outcome.state.status == "planning" and _dispatched(outcome)[0].role == "planner"
        else:
            assert outcome.ignored
    elif kind == "current_failure":
        if status == "submitted":  # nothing was dispatched, so no step can have failed
            assert outcome.ignored
        else:
            assert outcome.state.status == "failed" and outcome.state.result.failure_class == "env.infra"
    elif kind == "current_result":
        if status == "submitted":
            assert outcome.ignored
        else:
            assert not outcome.ignored and outcome.state.status == "retrieving"


# ── paths ───────────────────────────────────────────────────────────────────────────────────────
def test_a_passing_verification_ends_the_task_done_with_the_patch_and_usage_by_role() -> None:
    state = _to_verifying()
    outcome = _step(state, VerifyResult(step_id=_awaited(state), report=_report("passed")), role="verifier")
    result = outcome.state.result
    assert outcome.state.status == "done" and result.status == "done" and result.patch == "diff"
    assert result.files_changed == ["a.py"] and result.verification.verdict == "passed"
    assert result.steps == 3 and set(result.usage["by_role"]) == {"x", "verifier"}
    assert isinstance(outcome.commands[-1], Finish)


def test_an_unverified_patch_is_done_unless_the_task_requires_a_verified_one() -> None:
    """Our contract (--require-verified): an unverified patch ends the task `done` by default, and
    `handed_off` with `verify.unverified` when the task requires a verified patch."""
    why = Failure(
        failure_class=FailureClass.TEST_NO_REPRODUCTION, message="no test executes the code the patch changes"
    )
    report = VerificationReport(verdict="unverified", failures=[why], summary=f"unverified: {why.message}")
    default = _to_verifying()
    assert default.expected_step is not None
    done = _step(default, VerifyResult(step_id=default.expected_step, report=report)).state
    assert (done.status, done.result.failure_class) == ("done", None)
    strict = _to_verifying(_task().model_copy(update={"require_verified": True}))
    assert strict.expected_step is not None
    ended = _step(strict, VerifyResult(step_id=strict.expected_step, report=report)).state
    assert (ended.status, ended.result.failure_class) == ("handed_off", "verify.unverified")
    assert "unverified: no test executes the code the patch changes" in ended.result.report


def test_a_failed_verification_sends_the_failures_back_to_the_coder() -> None:
    state = _to_verifying()
    outcome = _step(state, VerifyResult(step_id=_awaited(state), report=_report("failed", _fail())))
    (dispatch,) = _dispatched(outcome)
    assert dispatch.role == "coder" and isinstance(dispatch.payload, CodeRequest)
    assert (
        "tests/test_a.py::test_x" in dispatch.payload.feedback  # pyright: ignore[reportOperatorIssue] - the feedback of a revision request is set
        and "tests/test_a.py:3" in dispatch.payload.feedback  # pyright: ignore[reportOperatorIssue] - the feedback of a revision request is set
    )
    assert dispatch.payload.previous_patch == "diff" and outcome.state.revisions == 1


def test_the_same_failures_twice_in_a_row_hand_the_task_off() -> None:
    state = _to_verifying()
    state = _step(state, VerifyResult(step_id=_awaited(state), report=_report("failed", _fail()))).state
    state = _step(state, CodeResult(step_id=_awaited(state), patch="diff2", files_changed=["a.py"])).state
    outcome = _step(state, VerifyResult(step_id=_awaited(state), report=_report("failed", _fail())))
    assert outcome.state.status == "handed_off" and outcome.state.result.failure_class == "test.still_failing"
    assert "Handed off" in outcome.state.result.report and "a.py" in outcome.state.result.report


def test_the_revision_budget_ends_the_loop_and_two_failed_revisions_bring_a_new_plan() -> None:
    state = _to_verifying(_task(max_revisions=3))
    roles = []
    for i in range(4):
        outcome = _step(
            state, VerifyResult(step_id=_awaited(state), report=_report("failed", _fail(f"t::{i}")))
        )
        state = outcome.state
        if state.status == "handed_off":
            break
        (dispatch,) = _dispatched(outcome)
        roles.append(dispatch.role)
        if dispatch.role == "planner":
            assert isinstance(dispatch.payload, PlanRequest) and dispatch.payload.feedback
            state = _step(
                state, PlanResult(step_id=_awaited(state), plan=Plan(revision_reason="tests fail"))
            ).state
            state = _step(state, Context(step_id=_awaited(state))).state
        state = _step(state, CodeResult(step_id=_awaited(state), patch=f"d{i}", files_changed=["a.py"])).state
    assert roles == ["coder", "coder", "planner"]
    assert state.status == "handed_off" and state.result.failure_class == "budget.revisions"
    assert state.result.plan["revisions"][0]["reason"] == "tests fail"


def _priced_planner_usage() -> Usage:
    """The usage a planner step reports after one request through the metered model, its reported
    tokens (1000 in, 500 out) priced as gpt-4o's: the cost a real role produces."""
    import anyio
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import RequestUsage

    from agents.models.adapter import MeteredModel
    from agents.runtime.metering import usage_of

    def plan(messages, info) -> ModelResponse:
        call = ToolCallPart(info.output_tools[0].name, {"steps": []})
        return ModelResponse(parts=[call], usage=RequestUsage(input_tokens=1000, output_tokens=500))

    function = FunctionModel(plan)
    function.priced_as = "gpt-4o"  # type: ignore[attr-defined] - a scripted model function carries priced_as, as in examples/models
    model = MeteredModel(function, name="function:plan.py:plan", role="planner")
    result = anyio.run(Agent(model, output_type=Plan).run, "plan")
    return usage_of(result.usage, model)


@pytest.mark.parametrize(
    ("budgets", "usage", "limit"),
    [
        ({"max_steps": 3}, Usage(requests=3), "budget.steps"),
        ({"max_tokens": 100}, Usage(input_tokens=100), "budget.tokens"),
        ({"max_cost_usd": 0.0075}, _priced_planner_usage, "budget.cost"),
    ],
)
def test_a_spent_budget_hands_off_before_the_next_model_step(budgets: dict, usage, limit: str) -> None:
    if callable(usage):
        usage = usage()
        assert usage.cost_usd == pytest.approx(0.0075)  # $2.50 in, $10 out per million tokens  # pyright: ignore[reportAttributeAccessIssue] - usage is the Usage the parametrized factory returned
    state = transition(_state(_task(**budgets)), Start(), pipeline=FIX, now=T0).state
    state = _step(state, PlanResult(step_id=_awaited(state), plan=Plan(), usage=usage)).state  # pyright: ignore[reportArgumentType] - usage is the Usage the parametrized factory returned
    outcome = _step(state, Context(step_id=_awaited(state)))  # the coder would be next
    assert outcome.state.status == "handed_off" and outcome.state.result.failure_class == limit
    assert not _dispatched(outcome)


def test_the_deadline_hands_off_at_the_next_step_whatever_it_is() -> None:
    state = transition(_state(_task(deadline_s=60)), Start(), pipeline=FIX, now=T0).state
    outcome = _step(state, PlanResult(step_id=_awaited(state), plan=Plan()), now=T0 + timedelta(seconds=61))
    assert outcome.state.status == "handed_off" and outcome.state.result.failure_class == "budget.wall"


def test_a_coder_stopped_by_a_limit_hands_off_with_its_partial_patch() -> None:
    state = transition(_state(), Start(), pipeline=FIX, now=T0).state
    state = _step(state, PlanResult(step_id=_awaited(state), plan=Plan())).state
    state = _step(state, Context(step_id=_awaited(state))).state
    outcome = _step(
        state,
        CodeResult(
            step_id=_awaited(state),
            patch="partial",
            files_changed=["b.py"],
            stopped_by="agent.loop",
            message="same call 3 times",
        ),
    )
    result = outcome.state.result
    assert (
        result.status == "handed_off" and result.failure_class == "agent.loop" and result.patch == "partial"
    )
    assert "same call 3 times" in result.report and "b.py" in result.report


def test_a_late_result_of_a_superseded_step_is_ignored() -> None:
    state = _to_verifying()
    old_code_step = state.steps_done[-1]
    late = StepDone(old_code_step, "coder", CodeResult(step_id=old_code_step, patch="old"))
    outcome = transition(state, late, pipeline=FIX, now=T0)
    assert outcome.ignored and outcome.state == state


def test_a_result_of_the_wrong_kind_for_the_stage_is_ignored() -> None:
    state = _to_verifying()
    outcome = transition(state, StepDone(_awaited(state), "echo", EchoResult(text="x")), pipeline=FIX, now=T0)
    assert outcome.ignored and outcome.state == state


def test_read_mode_answers_then_checks_the_answer_and_no_model_diagnoses() -> None:
    read = _task("read")
    assert (
        pipeline_for(read) is EXPLAIN
        and pipeline_for(_task().model_copy(update={"models": ModelNames()})) is DIAGNOSE
    )
    state = transition(_state(read), Start(), pipeline=EXPLAIN, now=T0).state
    state = _step(state, PlanResult(step_id=_awaited(state), plan=Plan()), pipeline=EXPLAIN).state
    state = _step(state, Context(step_id=_awaited(state)), pipeline=EXPLAIN).state
    assert state.status == "answering"
    outcome = _step(state, CodeResult(step_id=_awaited(state), answer="see a.py:3"), pipeline=EXPLAIN)
    (dispatch,) = _dispatched(outcome)
    assert isinstance(dispatch.payload, VerifyRequest) and dispatch.payload.answer == "see a.py:3"
    final = _step(
        outcome.state,
        VerifyResult(step_id=_awaited(outcome.state), report=_report("passed")),
        pipeline=EXPLAIN,
    ).state
    assert final.status == "done" and final.result.answer == "see a.py:3" and final.result.patch is None

    quiet = _task().model_copy(update={"models": ModelNames()})
    state = transition(_state(quiet), Start(), pipeline=DIAGNOSE, now=T0).state
    state = _step(state, PlanResult(step_id=_awaited(state), plan=Plan(fixed=True)), pipeline=DIAGNOSE).state
    raised = ["ZeroDivisionError raised at a.py:3 in mean"]
    state = _step(state, Context(step_id=_awaited(state), raised=raised), pipeline=DIAGNOSE).state
    (verify,) = [c for c in [state] if c.status == "verifying"]
    final = _step(
        verify,
        VerifyResult(step_id=_awaited(verify), report=_report("failed", _fail())),
        pipeline=DIAGNOSE,
    ).state
    assert final.status == "diagnosed" and "tests/test_a.py::test_x" in final.result.answer  # pyright: ignore[reportOperatorIssue] - a diagnosed task's result has its answer
    # Without a model, what the example raised and where is the diagnosis's lead.
    assert "raised: ZeroDivisionError raised at a.py:3 in mean." in final.result.answer  # pyright: ignore[reportOperatorIssue] - a diagnosed task's result has its answer


def test_the_transition_is_pure() -> None:
    """Same record and input, same outcome: what lets a redelivered input be handled again safely."""
    state = _to_verifying()
    event = StepDone(
        state.expected_step,  # pyright: ignore[reportArgumentType] - the task waits for a step here
        "verifier",
        VerifyResult(step_id=_awaited(state), report=_report("passed")),
    )
    assert transition(state, event, pipeline=FIX, now=T0) == transition(state, event, pipeline=FIX, now=T0)


# ── what the events and the result say ──────────────────────────────────────────────────────────
def _emitted(outcome, name: str):
    from agents.orchestrator.io import Emit

    return [c for c in outcome.commands if isinstance(c, Emit) and c.name == name]


def _published(outcome):
    """What reaches readers: events and the result (not the work dispatched to the next role)."""
    return [c for c in outcome.commands if not isinstance(c, Dispatch)]


def test_a_stage_result_event_names_the_role_and_step_that_produced_it() -> None:
    state = transition(_state(), Start(), pipeline=FIX, now=T0).state
    plan_step = state.expected_step
    outcome = _step(
        state,
        PlanResult(step_id=plan_step, plan=Plan(steps=[PlanStep(description="s")])),  # pyright: ignore[reportArgumentType] - the task waits for a step here
        role="planner",
    )
    (plan_event,) = _emitted(outcome, "plan")
    assert (plan_event.data["role"], plan_event.data["step_id"]) == ("planner", plan_step)
    (entering,) = _emitted(outcome, "transition")  # the next stage's transition keeps its own step
    assert entering.data["role"] == "retriever" and entering.data["step_id"] == outcome.state.expected_step


def test_a_hand_off_is_an_event_carrying_the_report_and_what_is_left() -> None:
    state = _to_verifying(_task(max_revisions=0))
    outcome = _step(
        state, VerifyResult(step_id=_awaited(state), report=_report("failed", _fail())), role="verifier"
    )
    assert outcome.state.status == "handed_off"
    (hand_off,) = _emitted(outcome, "hand_off")
    assert hand_off.data["failure_class"] == "budget.revisions"
    assert (
        hand_off.data["report"] == outcome.state.result.report
        and "Remaining failures:" in hand_off.data["report"]
    )
    assert hand_off.data["files_changed"] == ["a.py"] and hand_off.data["partial_patch"] is True
    done = _step(_to_verifying(), VerifyResult(step_id="", report=_report("passed")), role="verifier")
    assert not _emitted(done, "hand_off")


def test_a_secret_the_model_wrote_into_its_plan_or_answer_leaves_in_no_event_or_result() -> None:
    """Plans and answers are model output: a key they quote is masked in the events, the published
    result and the result kept on the record."""
    key = "sk-proj-" + "Zq7Xv2Lw9Rt4Yb8Nc3Md6Kf1"
    state = transition(_state(_task(mode="read")), Start(), pipeline=EXPLAIN, now=T0).state
    plan = Plan(
        steps=[PlanStep(description=f"call the API with {key}")], hypotheses=[f"OPENAI_API_KEY={key}"]
    )
    state = _step(state, PlanResult(step_id=_awaited(state), plan=plan), role="planner", pipeline=EXPLAIN)
    assert key not in repr(_published(state))
    assert key in repr(_dispatched(state))  # the work itself goes on to the retriever as planned
    state = _step(state.state, Context(step_id=_awaited(state.state)), pipeline=EXPLAIN).state
    outcome = _step(state, CodeResult(step_id=_awaited(state), answer=f"The key is {key}."), pipeline=EXPLAIN)
    outcome = _step(
        outcome.state, VerifyResult(step_id="", report=_report("passed")), role="verifier", pipeline=EXPLAIN
    )
    assert outcome.state.status == "done"
    assert key not in repr(_published(outcome)) and key not in outcome.state.result.model_dump_json()
    assert "[redacted]" in outcome.state.result.answer and "[redacted]" in str(outcome.state.result.plan)  # pyright: ignore[reportOperatorIssue] - the result of an answered task has its answer
