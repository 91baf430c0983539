"""Several attempts and the `select` stage, through the pure transition function: each attempt
coded from the starting tree and verified, a failed attempt kept as a candidate rather than
revised, the select role sent every candidate, the choice in the result and the events, the
budgets binding over all attempts together, and a failed choice revised."""

# The tests drive each step to the state they assert and then read its fields: a None there fails
# the test as an assert would, so the checker's Optional rules are off in this file.
# pyright: reportOptionalMemberAccess=false, reportOptionalSubscript=false

from datetime import UTC, datetime

from agents.messages import (
    Attempt,
    Budgets,
    CodeRequest,
    CodeResult,
    Context,
    ModelNames,
    PipelineChoice,
    Plan,
    PlanResult,
    PlanStep,
    SelectRequest,
    SelectResult,
    TaskState,
    TaskSubmitted,
    Usage,
    VerifyResult,
)
from agents.messages.verification import Failure, VerificationReport
from agents.orchestrator.io import Dispatch, Emit, Finish, Outcome, Start, StepDone
from agents.orchestrator.machine import transition
from agents.orchestrator.pipeline import FIX, Pipeline, pipeline_for
from agents.roles.selector.role import select

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MODELS = ModelNames(default="function:/x.py:f")
PIPELINE = pipeline_for(
    TaskSubmitted(text="t", repo="/r", mode="write", models=MODELS, budgets=Budgets(attempts=3))
)


def _task(**budgets: object) -> TaskSubmitted:
    return TaskSubmitted(text="fix it", repo="/r", mode="write", models=MODELS, budgets=Budgets(**budgets))  # pyright: ignore[reportArgumentType] - budgets are literals of each test, validated by pydantic


def _step(state: TaskState, payload: object, pipeline: Pipeline = PIPELINE) -> Outcome:
    assert state.expected_step is not None
    return transition(state, StepDone(state.expected_step, "x", payload), pipeline=pipeline, now=T0)  # pyright: ignore[reportArgumentType] - each test's payload is a result message


def _request(outcome: Outcome) -> object:
    (dispatch,) = [c for c in outcome.commands if isinstance(c, Dispatch)]
    return dispatch.payload


def _events(outcome: Outcome, name: str) -> list[Emit]:
    return [c for c in outcome.commands if isinstance(c, Emit) and c.name == name]


def _failed(test_id: str, failure_class: str = "test.still_failing") -> VerificationReport:
    failure = Failure(failure_class=failure_class, test_id=test_id, message="boom")  # pyright: ignore[reportArgumentType] - pydantic turns the value into its FailureClass member
    regressions = [test_id] if failure_class == "test.regression" else []
    return VerificationReport(verdict="failed", failures=[failure], regressions=regressions)


PASSED = VerificationReport(verdict="passed", evidence=["tests/test_a.py::test_x"], evidence_kind="flip")


def _planned(task: TaskSubmitted, pipeline: Pipeline = PIPELINE) -> Outcome:
    state = transition(
        TaskState(task_id="t", status="submitted", task=task, created_at=T0, updated_at=T0),
        Start(),
        pipeline=pipeline,
        now=T0,
    ).state
    plan = PlanResult(
        step_id=state.expected_step or "",
        plan=Plan(steps=[PlanStep(description="s")]),
        usage=Usage(requests=1),
    )
    state = _step(state, plan, pipeline).state
    return _step(state, Context(step_id=state.expected_step or ""), pipeline)


def _attempt(outcome: Outcome, patch: str, report: VerificationReport, requests: int = 2) -> Outcome:
    """Code `patch` for the code request `outcome` sent, then verify it as `report`."""
    state = outcome.state
    coded = _step(
        state,
        CodeResult(
            step_id=state.expected_step or "",
            patch=patch,
            files_changed=["a.py"],
            usage=Usage(requests=requests),
        ),
    )
    assert coded.state.status == "verifying"
    return _step(coded.state, VerifyResult(step_id=coded.state.expected_step or "", report=report))


def test_each_attempt_starts_from_the_starting_tree_and_a_failed_one_is_a_candidate_not_a_revision() -> None:
    outcome = _planned(_task(attempts=3))
    first = _request(outcome)
    assert isinstance(first, CodeRequest) and first.attempt == 1 and first.previous_patch is None
    outcome = _attempt(outcome, "wrong", _failed("tests/test_a.py::test_x"))
    second = _request(outcome)
    assert isinstance(second, CodeRequest)
    assert (second.attempt, second.previous_patch, second.feedback) == (2, None, None)
    assert outcome.state.revisions == 0 and outcome.state.patch is None
    outcome = _attempt(outcome, "breaks", _failed("tests/test_b.py::test_y", "test.regression"))
    outcome = _attempt(outcome, "right", PASSED)

    request = _request(outcome)
    assert outcome.state.status == "selecting"
    assert isinstance(request, SelectRequest)
    assert [(c.attempt, c.patch, c.report.verdict) for c in request.candidates] == [
        (1, "wrong", "failed"),
        (2, "breaks", "failed"),
        (3, "right", "passed"),
    ]
    told = _events(outcome, "candidate")
    assert [e.data["attempt"] for e in told] == [3] and told[0].data["evidence"] == [
        "tests/test_a.py::test_x"
    ]

    chosen = select(request)
    assert chosen.chosen == 3 and chosen.order[0] == 3
    done = _step(outcome.state, chosen)
    (finish,) = [c for c in done.commands if isinstance(c, Finish)]
    result = finish.result
    assert result.status == "done" and result.patch == "right" and result.verification.verdict == "passed"
    assert [(c.attempt, c.verdict, c.chosen) for c in result.candidates] == [
        (1, "failed", False),
        (2, "failed", False),
        (3, "passed", True),
    ]
    assert result.candidates[2].reason == chosen.reason and "evidence: flip" in chosen.reason
    assert result.candidates[2].evidence == ["tests/test_a.py::test_x"]
    assert "ranked" in result.candidates[0].reason
    assert "Chose attempt 3 of 3" in result.report
    (selection,) = _events(done, "selection")
    assert selection.data["chosen"] == 3 and selection.data["role"] == "x"


def test_the_step_budget_binds_over_all_attempts_and_the_choice_is_among_those_made() -> None:
    """Planning takes 1 request and each attempt 3: with 7, a third attempt cannot start."""
    outcome = _planned(_task(attempts=3, max_steps=7))
    outcome = _attempt(outcome, "one", _failed("tests/test_a.py::test_x"), requests=3)
    outcome = _attempt(outcome, "two", PASSED, requests=3)
    request = _request(outcome)
    assert isinstance(request, SelectRequest) and [c.attempt for c in request.candidates] == [1, 2]
    assert outcome.state.attempts_stopped_by == "budget.steps"
    (stopped,) = _events(outcome, "attempts_stopped")
    assert stopped.data == {"made": 2, "wanted": 3, "failure_class": "budget.steps", "role": "orchestrator"}
    done = _step(outcome.state, select(request))
    result = next(c.result for c in done.commands if isinstance(c, Finish))
    assert result.status == "done" and result.patch == "two" and result.steps == 7
    assert "Only 2 of 3 attempts were made (budget.steps)" in result.report


def test_an_attempt_the_budget_stops_mid_run_leaves_the_choice_to_the_attempts_judged() -> None:
    outcome = _planned(_task(attempts=3))
    outcome = _attempt(outcome, "one", PASSED)
    state = outcome.state
    stopped = CodeResult(
        step_id=state.expected_step or "", patch="half", stopped_by="budget.tokens", message="out"
    )
    outcome = _step(state, stopped)
    request = _request(outcome)
    assert isinstance(request, SelectRequest) and [c.patch for c in request.candidates] == ["one"]
    done = _step(outcome.state, select(request))
    result = next(c.result for c in done.commands if isinstance(c, Finish))
    assert result.status == "done" and result.patch == "one" and len(result.candidates) == 1


def test_a_failed_choice_is_revised_and_the_revision_is_one_more_candidate() -> None:
    outcome = _planned(_task(attempts=2, max_revisions=1))
    outcome = _attempt(outcome, "wrong", _failed("tests/test_a.py::test_x"))
    outcome = _attempt(outcome, "worse", _failed("tests/test_b.py::test_y", "test.regression"))
    request = _request(outcome)
    assert isinstance(request, SelectRequest)
    outcome = _step(outcome.state, select(request))
    revision = _request(outcome)
    assert isinstance(revision, CodeRequest)
    assert (revision.attempt, revision.previous_patch) == (3, "wrong")
    assert revision.feedback and "tests/test_a.py::test_x" in revision.feedback
    assert outcome.state.revisions == 1 and outcome.state.revision_of == 1
    outcome = _attempt(outcome, "fixed", PASSED)
    again = _request(outcome)
    assert isinstance(again, SelectRequest)
    assert [(c.attempt, c.revision_of) for c in again.candidates] == [(1, None), (2, None), (3, 1)]
    done = _step(outcome.state, select(again))
    result = next(c.result for c in done.commands if isinstance(c, Finish))
    assert result.status == "done" and result.patch == "fixed" and result.revisions == 1
    assert result.candidates[2].revision_of == 1 and result.candidates[2].chosen


def test_every_attempt_failing_without_revisions_left_hands_the_task_off() -> None:
    outcome = _planned(_task(attempts=2, max_revisions=0))
    outcome = _attempt(outcome, "wrong", _failed("tests/test_a.py::test_x"))
    outcome = _attempt(outcome, "worse", _failed("tests/test_b.py::test_y", "test.regression"))
    request = _request(outcome)
    assert isinstance(request, SelectRequest)
    done = _step(outcome.state, select(request))
    result = next(c.result for c in done.commands if isinstance(c, Finish))
    assert (result.status, result.failure_class) == ("handed_off", "budget.revisions")
    assert result.patch == "wrong" and [c.chosen for c in result.candidates] == [True, False]


def test_a_selector_choosing_no_candidate_fails_the_task_naming_the_candidates() -> None:
    outcome = _planned(_task(attempts=2))
    outcome = _attempt(outcome, "one", PASSED)
    outcome = _attempt(outcome, "two", PASSED)
    done = _step(outcome.state, SelectResult(step_id=outcome.state.expected_step or "", chosen=7))
    result = next(c.result for c in done.commands if isinstance(c, Finish))
    assert (result.status, result.failure_class) == ("failed", "role.malformed")
    assert "attempt 7, which is not one of the candidates (1, 2)" in result.report


def test_several_attempts_add_a_select_stage_to_a_pipeline_that_has_none() -> None:
    assert pipeline_for(_task()) is FIX
    assert PIPELINE.kinds == (*FIX.kinds, "select") and PIPELINE.stages[-1].role == "selector"
    own = PipelineChoice(
        name="mine", stages=["plan:planner", "code:coder", "verify:verifier", "select:picker"]
    )
    mine = pipeline_for(_task(attempts=2).model_copy(update={"pipeline": own}))
    assert [s.role for s in mine.stages if s.kind == "select"] == ["picker"]
    read = _task(attempts=2).model_copy(update={"mode": "read"})
    assert "select" not in pipeline_for(read).kinds


def test_one_attempt_with_a_select_stage_revises_as_usual_and_chooses_the_only_candidate() -> None:
    own = PipelineChoice(
        name="mine",
        stages=["plan:planner", "retrieve:retriever", "code:coder", "verify:verifier", "select:selector"],
    )
    task = _task(max_revisions=1).model_copy(update={"pipeline": own})
    pipeline = pipeline_for(task)
    outcome = _planned(task, pipeline)
    outcome = _attempt_in(outcome, pipeline, "wrong", _failed("tests/test_a.py::test_x"))
    assert isinstance(_request(outcome), CodeRequest) and outcome.state.revisions == 1
    outcome = _attempt_in(outcome, pipeline, "right", PASSED)
    request = _request(outcome)
    assert isinstance(request, SelectRequest) and [c.patch for c in request.candidates] == ["right"]
    chosen = select(request)
    assert chosen.reason.startswith("the only candidate")
    assert isinstance(request.candidates[0], Attempt)


def _attempt_in(outcome: Outcome, pipeline: Pipeline, patch: str, report: VerificationReport) -> Outcome:
    state = outcome.state
    coded = _step(
        state, CodeResult(step_id=state.expected_step or "", patch=patch, files_changed=["a.py"]), pipeline
    )
    return _step(coded.state, VerifyResult(step_id=coded.state.expected_step or "", report=report), pipeline)
