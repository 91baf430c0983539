"""The role registry: built-ins and plug-ins from the `codeloop.roles` entry points, broken
plug-ins reported by name with the reason, and pipelines checked against it."""

from pathlib import Path

import pytest

from agents.messages import ReviewRequest, ReviewResult, StepBudget, TaskSubmitted
from agents.orchestrator.pipeline import FIX, PipelineError, parse_pipeline
from agents.orchestrator.stages.review import REVIEW
from agents.runtime.api import define_role, result_of
from agents.runtime.plugins import load_roles
from agents.runtime.role import StepError
from codeloop.config.pipelines import (
    PipelineConfigError,
    configured_pipelines,
    resolve_pipeline,
    role_problems,
)
from codeloop.wiring.roles import unknown_role_problem
from tests.roles.plugin_points import with_samples


def test_the_built_in_roles_come_from_codeloops_own_entry_points() -> None:
    registry = load_roles()
    builtins = {name: r for name, r in registry.roles.items() if r.builtin}
    assert {n: r.definition.kind for n, r in builtins.items()} == {
        "planner": "plan",
        "retriever": "retrieve",
        "coder": "code",
        "verifier": "verify",
        "selector": "select",
        "echo": "echo",
    }
    assert {r.entry_point for r in builtins.values()} >= {
        "agents.runtime.builtin:PLANNER",
        "agents.runtime.builtin:VERIFIER",
    }
    assert role_problems(FIX, registry) == []


def test_a_role_removed_from_the_registry_makes_its_pipeline_refused() -> None:
    registry = load_roles().without("verifier")
    problems = role_problems(FIX, registry)
    assert len(problems) == 1 and "stage verify:verifier: role 'verifier' is not installed" in problems[0]
    assert "role 'verifier' is not installed" in (
        unknown_role_problem(["orchestrator", "verifier"], registry) or ""
    )
    # A live worker elsewhere (another process, another language) serves it after all.
    assert role_problems(FIX, registry, live={"verifier"}) == []


def test_broken_plug_ins_are_reported_by_name_with_the_reason_and_the_others_load() -> None:
    registry = with_samples()
    reasons = {b.name: b.reason for b in registry.broken}
    assert set(reasons) == {"import-fails", "wrong-signature", "not-a-role", "misnamed", "verifier"}
    assert "raised ImportError: No module named 'leftpad'" in reasons["import-fails"]
    assert "is not an async function" in reasons["wrong-signature"]
    assert "is a int, not a RoleDefinition" in reasons["not-a-role"]
    assert "calls itself 'called-otherwise'" in reasons["misnamed"]
    assert "clashes with the built-in role 'verifier'" in reasons["verifier"]
    # The built-in verifier is the one that stays; the good plug-ins load beside it.
    assert registry.roles["verifier"].builtin
    assert {"sample-coder", "malformed-reviewer", "raising-reviewer", "approver"} <= set(registry.roles)
    assert "installed but broken" in registry.why_missing("import-fails")


def test_define_role_refuses_a_handler_of_the_wrong_shape_and_an_unknown_kind() -> None:
    async def one_argument(request):
        return {}

    with pytest.raises(TypeError, match=r"must take \(request, ctx\)"):
        define_role("x", "review", one_argument)  # pyright: ignore[reportArgumentType] - a wrong signature on purpose: the test checks it is refused
    with pytest.raises(ValueError, match="unknown stage kind 'lint'"):
        define_role("x", "lint", one_argument)  # pyright: ignore[reportArgumentType] - a wrong signature on purpose: the test checks it is refused
    with pytest.raises(ValueError, match="use letters, digits"):
        define_role("a role", "review", one_argument)  # pyright: ignore[reportArgumentType] - a wrong signature on purpose: the test checks it is refused


def _review_request() -> ReviewRequest:
    from datetime import UTC, datetime

    from agents.messages import Context, Plan

    return ReviewRequest(
        step_id="04-review",
        task=TaskSubmitted(text="t", repo="/r"),
        plan=Plan(),
        context=Context(step_id=""),
        budget=StepBudget(requests=1, tokens=1, deadline_at=datetime.now(UTC)),
    )


def test_a_handlers_result_is_its_kinds_message_or_fails_the_step_as_role_malformed() -> None:
    kind = REVIEW
    ok = result_of("r", kind, _review_request(), {"verdict": "approve"})
    assert ok == ReviewResult(step_id="04-review", verdict="approve")
    with pytest.raises(StepError) as malformed:
        result_of("r", kind, _review_request(), {"verdict": "fine", "findings": "none"})
    assert malformed.value.failure_class == "role.malformed"
    assert "the r role returned a malformed ReviewResult: verdict:" in str(malformed.value)
    with pytest.raises(StepError, match="returned str, not a ReviewResult"):
        result_of("r", kind, _review_request(), "approve")


def test_pipeline_stages_and_order_are_checked() -> None:
    secure = parse_pipeline(
        "secure", ["plan:planner", "code:coder", "review:a", "verify:verifier", "review:b"]
    )
    assert [s.status for s in secure.stages] == ["planning", "coding", "reviewing", "verifying", "reviewing"]
    for stages, says in [
        (["plan planner"], "is not KIND:ROLE"),
        (["lint:linter"], "unknown stage kind 'lint'"),
        (["plan:planner", "review:r", "code:coder"], "must come after a code stage"),
        (["code:coder", "verify:verifier", "code:coder"], "at most one code stage"),
        (["code:coder", "plan:planner"], "cannot come after a code stage"),
        ([], "at least one stage"),
    ]:
        with pytest.raises(PipelineError, match=says):
            parse_pipeline("p", stages)


def test_configured_pipelines_are_read_from_the_project_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.codeloop.pipelines]\nquick = ["code:coder"]\nsecure = ["code:coder", "verify:verifier"]\n'
    )
    assert configured_pipelines(tmp_path) == {
        "quick": ["code:coder"],
        "secure": ["code:coder", "verify:verifier"],
    }
    # codeloop.toml is the project file when there is one, as for every other key.
    (tmp_path / "codeloop.toml").write_text(
        '[pipelines]\nsecure = ["code:coder", "review:security-reviewer"]\n'
    )
    assert configured_pipelines(tmp_path) == {"secure": ["code:coder", "review:security-reviewer"]}
    assert [s.role for s in resolve_pipeline("secure", tmp_path).stages] == ["coder", "security-reviewer"]
    assert resolve_pipeline("fix", tmp_path) is FIX
    with pytest.raises(
        PipelineError, match=r"no pipeline named 'nope'; known: diagnose, echo, explain, fix, secure"
    ):
        resolve_pipeline("nope", tmp_path)
    (tmp_path / "codeloop.toml").write_text("[pipelines]\nsecure = 'code:coder'\n")
    with pytest.raises(PipelineConfigError, match=r"codeloop.toml.*pipelines.secure"):
        configured_pipelines(tmp_path)
    (tmp_path / "codeloop.toml").write_text("[pipelines\n")
    with pytest.raises(PipelineConfigError, match=r"codeloop.toml"):
        configured_pipelines(tmp_path)


def test_a_stage_naming_a_role_of_another_kind_is_refused() -> None:
    pipeline = parse_pipeline("odd", ["code:coder", "review:verifier"])
    assert role_problems(pipeline, load_roles()) == [
        "stage review:verifier: the role 'verifier' serves verify stages, not review"
    ]


def test_codeloop_roles_names_each_broken_plug_in_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    import agents.runtime.plugins
    from codeloop.cli import app

    monkeypatch.setattr(agents.runtime.plugins, "load_roles", with_samples)
    shown = CliRunner().invoke(app, ["roles", "--json"])
    assert shown.exit_code == 0, shown.output
    listed = json.loads(shown.stdout)
    broken = {b["name"]: b["reason"] for b in listed["broken"]}
    assert (
        "No module named 'leftpad'" in broken["import-fails"]
        and "not an async function" in broken["wrong-signature"]
    )
    assert "approver" in {r["name"] for r in listed["installed"]} and listed["bus"] is False
    text = CliRunner().invoke(app, ["roles"])
    assert "broken: import-fails (" in text.stdout


def test_run_submit_and_eval_refuse_an_unknown_pipeline_before_anything_starts(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from codeloop.cli import app

    root = Path(__file__).resolve().parents[2]
    for args in (
        ["run", "x", "--repo", str(tmp_path), "--pipeline", "nope"],
        ["submit", "x", "--repo", str(tmp_path), "--pipeline", "nope"],
        ["eval", str(root / "examples" / "eval"), "--pipeline", "nope", "--out", str(tmp_path / "out")],
    ):
        shown = CliRunner().invoke(app, args)
        assert shown.exit_code == 2, (args, shown.output)
        assert "--pipeline: no pipeline named 'nope'; known: diagnose, echo, explain, fix" in shown.output, (
            shown.output
        )
    assert not (tmp_path / "out").exists()
