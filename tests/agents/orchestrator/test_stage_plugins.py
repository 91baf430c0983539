"""A stage kind added from outside codeloop: declared under the entry-point group
`codeloop.stages` as a plug-in package declares it, it is checked like the built-ins, the state
machine reacts to its results through it, and it runs in a pipeline end to end. Broken kinds are
reported by name with the reason while the others load."""

import json
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from pydantic import ValidationError

from agents.messages import StepRequest, TaskState, TaskSubmitted
from agents.orchestrator.io import Dispatch, Emit, Finish, Start, StepDone
from agents.orchestrator.machine import transition
from agents.orchestrator.pipeline import PipelineError, parse_pipeline
from agents.orchestrator.stages import ENTRY_POINT_GROUP, installed_kinds, known_statuses, load_kinds
from agents.orchestrator.stages.kind import At, End
from agents.roles.echo import EchoResult
from codeloop.testing import make_repo
from tests.agents.orchestrator.count_kind import COUNT, CountRequest, CountResult
from tests.processes import processes_mentioning, ready_process
from tests.roles.workers import auth_of

ROOT = Path(__file__).resolve().parents[3]
MODULE = "tests.agents.orchestrator.count_kind"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _awaited(state: TaskState) -> str:
    """The id of the step `state` waits for (the tests drive it only while it waits for one)."""
    assert state.expected_step is not None
    return state.expected_step


class _Impostor(StepRequest):
    """A request taking the `plan_request` tag, which the built-in plan kind's request holds."""

    kind: Literal["plan_request"] = "plan_request"


IMPOSTOR = replace(COUNT, name="impostor", request=_Impostor)


def _point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_the_built_in_kinds_come_from_codeloops_own_entry_points_in_pipeline_order() -> None:
    points = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.dist.name == "codeloop"}  # pyright: ignore[reportOptionalMemberAccess] - entry points found on the path always have their distribution
    assert points["plan"] == "agents.orchestrator.stages.plan:PLAN"
    assert list(installed_kinds())[:6] == ["plan", "retrieve", "code", "review", "verify", "echo"]


def test_broken_kinds_are_reported_by_name_with_the_reason_and_the_others_load() -> None:
    registry = load_kinds(
        [
            *entry_points(group=ENTRY_POINT_GROUP),
            _point("count", f"{MODULE}:COUNT"),
            _point("plan", f"{MODULE}:COUNT"),  # takes a built-in's name
            _point("not-a-kind", f"{MODULE}:WORD_COUNTER"),
            _point("tally", f"{MODULE}:COUNT"),
            _point("import-fails", "tests.roles.raises_on_import:ROLE"),
            _point("impostor", f"{__name__}:IMPOSTOR"),
        ]
    )
    reasons = {b.name: b.reason for b in registry.broken}
    assert set(reasons) == {"plan", "not-a-kind", "tally", "import-fails", "impostor"}
    assert "clashes with the built-in stage kind 'plan'" in reasons["plan"]
    assert "is a RoleDefinition, not a StageKind" in reasons["not-a-kind"]
    assert "the kind calls itself 'count'" in reasons["tally"]
    assert "raised ImportError: No module named 'leftpad'" in reasons["import-fails"]
    assert "kind 'plan_request' is registered by PlanRequest already" in reasons["impostor"]
    assert registry.kinds["count"] is COUNT and registry.kinds["plan"].request.__name__ == "PlanRequest"


COUNT_AS_DONE = replace(COUNT, name="count-as-done", status="done")
SHOUTING = replace(COUNT, name="shouting", status="Counting!")


def test_a_kind_declares_its_status_and_may_not_take_the_machines_own() -> None:
    """Our design: statuses are open to stage kinds, except the names the state machine gives a
    meaning (`submitted`, `revising`, the terminal ones), and a status is a lowercase word."""
    registry = load_kinds(
        [
            *entry_points(group=ENTRY_POINT_GROUP),
            _point("count", f"{MODULE}:COUNT"),
            _point("count-as-done", f"{__name__}:COUNT_AS_DONE"),
            _point("shouting", f"{__name__}:SHOUTING"),
        ]
    )
    reasons = {b.name: b.reason for b in registry.broken}
    assert "the status 'done' is the state machine's own" in reasons["count-as-done"]
    assert "the status 'Counting!' is not a lowercase word" in reasons["shouting"]
    assert COUNT.statuses == ("counting",) and registry.kinds["code"].statuses == ("coding", "answering")
    statuses = known_statuses(registry.kinds.values())
    assert statuses[0] == "submitted" and statuses[-6:] == (
        "done", "diagnosed", "handed_off", "failed", "cancelled", "rejected"
    )  # fmt: skip
    assert {"planning", "reviewing", "selecting", "counting", "revising"} <= set(statuses)
    assert "counting" not in known_statuses(installed_kinds().values())


def test_a_status_is_a_lowercase_word_in_the_record() -> None:
    """The record's status accepts a kind's name for it, but not anything at all."""
    task = TaskSubmitted(text="t", repo="/r")
    with pytest.raises(ValidationError, match="status"):
        TaskState(task_id="t", status="Counting!", task=task, created_at=T0, updated_at=T0)


def test_a_plug_in_kind_is_checked_against_the_order_rules_like_a_built_in() -> None:
    kinds = {**installed_kinds(), "count": COUNT}
    counted = parse_pipeline("counted", ["echo:echo", "count:word-counter"], kinds=kinds)
    assert [(s.kind, s.role, s.status) for s in counted.stages] == [
        ("echo", "echo", "coding"),
        ("count", "word-counter", "counting"),
    ]
    with pytest.raises(PipelineError, match=r"stage 2 \(plan:planner\) cannot come after a count stage"):
        parse_pipeline("late", ["count:word-counter", "plan:planner"], kinds=kinds)
    with pytest.raises(PipelineError, match="unknown stage kind 'count'"):
        parse_pipeline("counted", ["count:word-counter"], kinds=installed_kinds())


def _ends_counting(state: TaskState, result: CountResult, at: At) -> End:
    return End(state, "counting", None, "a status that ends nothing")  # pyright: ignore[reportArgumentType] - what a plug-in written without a type checker may send


def test_a_kind_that_ends_a_task_with_a_running_status_is_refused_by_name() -> None:
    """Our design: only the machine's terminal statuses end a task; a kind's own status is for
    while its stage runs, and a reaction that ends with one is a plug-in bug named as such."""
    miscounting = replace(COUNT, react=_ends_counting)
    pipeline = parse_pipeline(
        "counted", ["count:word-counter"], kinds={**installed_kinds(), "count": miscounting}
    )
    task = TaskSubmitted(text="one two", repo="/r")
    state = TaskState(task_id="t", status="submitted", task=task, created_at=T0, updated_at=T0)
    state = transition(state, Start(), pipeline=pipeline, now=T0).state
    done = StepDone(_awaited(state), "word-counter", CountResult(step_id=_awaited(state), words=2))
    with pytest.raises(TypeError, match="ended the task with 'counting', not a terminal status"):
        transition(state, done, pipeline=pipeline, now=T0)


def test_the_machine_builds_the_request_and_reacts_through_the_stages_kind() -> None:
    """Our design: the machine knows no kind; the kind builds its request from the record and its
    result moves the task on."""
    pipeline = parse_pipeline(
        "counted", ["echo:echo", "count:word-counter"], kinds={**installed_kinds(), "count": COUNT}
    )
    task = TaskSubmitted(text="one two three", repo="/r")
    state = TaskState(task_id="t", status="submitted", task=task, created_at=T0, updated_at=T0)
    state = transition(state, Start(), pipeline=pipeline, now=T0).state
    outcome = transition(
        state,
        StepDone(_awaited(state), "echo", EchoResult(text="one two three")),
        pipeline=pipeline,
        now=T0,
    )
    sent = [c for c in outcome.commands if isinstance(c, Dispatch)]
    assert outcome.state.status == "counting" and sent[0].role == "word-counter"
    told = next(c for c in outcome.commands if isinstance(c, Emit) and c.name == "transition")
    assert told.data["status"] == "counting"
    # The record as the KV bucket stores it: a status only the plug-in declares loads back.
    stored = TaskState.model_validate_json(outcome.state.model_dump_json())
    assert stored.status == "counting" and stored == outcome.state
    assert sent[0].payload == CountRequest(step_id="02-count", task=task, text="one two three")

    outcome = transition(
        outcome.state,
        StepDone("02-count", "word-counter", CountResult(step_id="02-count", words=3)),
        pipeline=pipeline,
        now=T0,
    )
    told = next(c for c in outcome.commands if isinstance(c, Emit) and c.name == "count")
    assert told.data == {"words": 3, "role": "word-counter", "step_id": "02-count"}
    result = next(c.result for c in outcome.commands if isinstance(c, Finish))
    assert result.status == "done" and result.answer == "one two three (3 words)"


def _plug_in(root: Path) -> Path:
    """A directory holding only the plug-in's distribution metadata, as `pip install` leaves it:
    on a process's PYTHONPATH it installs the kind and its role there, and nowhere else."""
    info = root / "codeloop_count_kind-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: codeloop-count-kind\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[codeloop.stages]\ncount = {MODULE}:COUNT\n\n[codeloop.roles]\nword-counter = {MODULE}:WORD_COUNTER\n"
    )
    return root


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_") and k != "PYTHONPATH"}
    return {**env, "CODELOOP_HOME": str(home), **extra}


async def _codeloop(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process([sys.executable, "-m", "codeloop", *args], env=env, cwd=ROOT, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _record_once(client: dict[str, str], url: str, task_id: str, status: str) -> dict[str, Any]:
    """The task's record as `codeloop status --json` prints it, once it shows `status`."""
    while True:
        code, out, err = await _codeloop(client, "status", task_id, "--json", "--nats", url)
        record = json.loads(out) if code == 0 else {}
        if record.get("status") == status:
            return record
        await anyio.sleep(0.2)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_kind_installed_under_codeloop_stages_runs_in_a_pipeline_end_to_end(tmp_path: Path) -> None:
    """Our plug-in contract: a kind is one module plus its entry point; nothing is pip-installed,
    the processes that have the plug-in's metadata on their path have the kind, the others do not.
    While its stage waits, the task shows the kind's own status in `codeloop status --json`."""
    plug_in = _plug_in(tmp_path / "plug-in")
    repo = make_repo(
        tmp_path / "repo", {"codeloop.toml": '[pipelines]\ncounted = ["echo:echo", "count:word-counter"]\n'}
    )
    task = ("one two three", "--repo", str(repo), "--pipeline", "counted")

    code, _, err = await _codeloop(_env(tmp_path / "bare"), "run", *task, "--json")
    # Not installed here: the configuration's stage names are the installed kinds', a usage error.
    assert code == 2 and "KIND one of plan, retrieve, code, review, verify, echo, select and ROLE" in err
    assert "(got 'count:word-counter')" in err

    home = tmp_path / "serve"
    serve = [sys.executable, "-m", "codeloop", "serve", "--json", "--no-mcp", "--no-metrics"]
    with_plug_in = {"PYTHONPATH": str(plug_in)}
    async with ready_process(
        [*serve, "--role", "orchestrator", "--role", "echo"],
        env=_env(home, **with_plug_in),
        cwd=ROOT,
    ) as (_, note):
        url = note["nats_url"]
        client = _env(tmp_path / "client", **with_plug_in, **auth_of(home))
        with anyio.fail_after(120):
            code, out, err = await _codeloop(client, "submit", *task, "--nats", url)
            assert code == 0, err
            task_id = out.strip()
            # No word-counter serves yet: the task waits in the count stage, showing its status.
            waiting = await _record_once(client, url, task_id, "counting")
        assert (waiting["stage"], waiting["stage_role"]) == ("count", "word-counter")

        worker = [*serve, "--role", "word-counter", "--nats", url]
        worker_env = _env(tmp_path / "worker", **with_plug_in, **auth_of(home))
        async with ready_process(worker, env=worker_env, cwd=ROOT):
            with anyio.fail_after(120):
                code, _, err = await _codeloop(client, "watch", task_id, "--nats", url)
                assert code == 0, err
                ended = await _record_once(client, url, task_id, "done")
        result = ended["result"]
        assert result["status"] == "done" and result["answer"] == "one two three (3 words)"
        assert set(result["usage"]["by_role"]) == {"echo", "word-counter"}
    assert processes_mentioning(tmp_path) == []
