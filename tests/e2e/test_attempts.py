"""Several attempts end to end through `codeloop run --attempts N` with a scripted coder: every
attempt verified against the same starting tree, the right one chosen, every attempt in the
result and in the trace, the budgets binding over all attempts, and a select plug-in (a role of
the `select` kind installed under `codeloop.roles`) choosing instead of the built-in selector."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from codeloop.testing import PipelineRunner
from tests.processes import ready_process

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REPO_ROOT = Path(__file__).parents[2]
SCRIPTED = Path(__file__).with_name("scripted_attempts.py")
PICKER = "tests.e2e.first_picker"
TEXT = (
    "mean() in the calc package returns the wrong value: mean([2, 4, 6]) gives 6.0 but the "
    "arithmetic mean is 4.0. Fix it so the test suite passes."
)
FILES = {
    "calc/__init__.py": '"""Small arithmetic."""\n\nfrom calc.ops import mean, total\n',
    "calc/ops.py": "def total(xs):\n    return sum(xs)\n\n\ndef mean(xs):\n    return total(xs) / (len(xs) - 1)\n",
    "tests/test_ops.py": "from calc import mean, total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n\n\n"
    "def test_mean():\n    assert mean([2, 4, 6]) == 4.0\n",
}
MEAN, TOTAL = "tests/test_ops.py::test_mean", "tests/test_ops.py::test_total"


def _env(home: Path, plug_in: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    if plug_in is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(plug_in)) if p)
    return {**env, "CODELOOP_HOME": str(home)}


async def _codeloop(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    argv = [sys.executable, "-m", "codeloop", *args]
    with anyio.fail_after(900):  # a hang guard: on 2 shared cores a verified run can take minutes
        done = await anyio.run_process(argv, env=env, cwd=REPO_ROOT, check=False, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _run(env: dict[str, str], repo: Path, *options: str) -> tuple[int, dict[str, Any]]:
    args = ["run", TEXT, "--repo", str(repo), "--model", f"function:{SCRIPTED}:three_ways", "--json"]
    code, out, err = await _codeloop(env, *args, *options)
    assert out.strip(), err[-3000:]
    return code, json.loads(out)


def _notes(timeline: dict[str, Any], name: str) -> list[dict[str, Any]]:
    notes = [n for step in timeline["steps"] for n in step["notes"]] + timeline["outside_steps"]
    return [n for n in notes if n["name"] == name]


async def test_three_attempts_the_right_one_is_chosen_and_all_three_are_in_the_result_and_trace(
    tmp_path: Path,
) -> None:
    """Our contract (`--attempts N`, the result's `candidates`): a wrong fix, a fix that breaks
    another test and the right fix, each verified against the starting tree; the right one is
    chosen for its evidence, its patch is the result's, and the others stay listed with their
    verdicts, in the result and in `codeloop trace`."""
    repo = PipelineRunner.make_repo(tmp_path / "repo", FILES)
    env = _env(tmp_path / "home")
    serve = [sys.executable, "-m", "codeloop", "serve", "--json", "--no-mcp", "--no-metrics"]
    async with ready_process(serve, env=env, cwd=REPO_ROOT):  # run and trace find it in the home
        code, result = await _run(env, repo, "--mode", "execute", "--attempts", "3")
        traced = await _codeloop(env, "trace", result["task_id"], "--json")
        shown = await _codeloop(env, "status", result["task_id"])

    assert (code, result["status"]) == (0, "done"), result["report"]
    candidates = result["candidates"]
    assert [(c["attempt"], c["verdict"], c["chosen"]) for c in candidates] == [
        (1, "failed", False),
        (2, "failed", False),
        (3, "passed", True),
    ]
    right = candidates[2]
    assert right["evidence"] == [MEAN] and right["evidence_kind"] == "flip"
    assert (
        right["reason"].startswith("passed (evidence: flip)") and "the others are failed" in right["reason"]
    )
    assert result["patch"] == right["patch"] and "/ len(xs)" in right["patch"]
    assert result["verification"]["verdict"] == "passed" and result["verification"]["evidence"] == [MEAN]
    assert "+ 1)" in candidates[0]["patch"] and "sum(xs) + 1" in candidates[1]["patch"]
    assert all(c["reason"] for c in candidates)
    assert "Chose attempt 3 of 3" in result["report"] and result["revisions"] == 0
    assert result["usage"]["requests"] == 7  # the plan, then two requests per attempt

    assert "1 failed, 2 failed, 3 passed (chosen)" in shown[1], shown
    code, out, err = traced
    assert code == 0, err
    timeline = json.loads(out)
    told = _notes(timeline, "candidate")
    assert [(n["data"]["attempt"], n["data"]["verdict"]) for n in told] == [
        (1, "failed"),
        (2, "failed"),
        (3, "passed"),
    ]
    (selection,) = _notes(timeline, "selection")
    assert timeline["status"] == "done" and "selector" in timeline["roles"]
    assert selection["data"]["chosen"] == 3 and selection["data"]["role"] == "selector"
    # The starting tree's coverage is measured once; the later attempts' verifications reuse it.
    coverage = [
        next(c["summary"] for c in n["data"]["checks"] if c["name"] == "coverage")
        for n in _notes(timeline, "verification")
    ]
    assert len(coverage) == 3 and "was known" not in coverage[0]
    assert all("coverage of 1 file(s) was known" in summary for summary in coverage[1:]), coverage
    assert [s["role"] for s in timeline["steps"]].count("coder") == 3
    assert [s["role"] for s in timeline["steps"]].count("verifier") == 3


async def test_the_budgets_bind_over_all_attempts_together(tmp_path: Path) -> None:
    """Our contract ("budgets bind over all attempts together"): five model requests are the plan
    and two attempts, so the third is not made; the choice is among the two (the wrong fix, with
    no regression, over the one breaking test_total), and no request is left to revise it."""
    repo = PipelineRunner.make_repo(tmp_path / "repo", FILES)
    code, result = await _run(
        _env(tmp_path / "home"), repo, "--mode", "execute", "--attempts", "3", "--max-steps", "5"
    )
    assert (code, result["status"], result["failure_class"]) == (3, "handed_off", "budget.steps")
    assert [(c["attempt"], c["verdict"], c["chosen"]) for c in result["candidates"]] == [
        (1, "failed", True),
        (2, "failed", False),
    ]
    assert "regression" in result["candidates"][0]["reason"]
    assert result["usage"]["requests"] == 5
    assert "Attempts: 2 of 3 made (budget.steps stopped them)" in result["report"]


def _plug_in(root: Path) -> Path:
    """A directory holding only a plug-in's distribution metadata, as `pip install` leaves it: on
    a process's PYTHONPATH it installs the role `first-picker`, of the `select` kind, there."""
    info = root / "codeloop_first_picker-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: codeloop-first-picker\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[codeloop.roles]\nfirst-picker = {PICKER}:FIRST_PICKER\n")
    return root


async def test_a_select_plug_in_chooses_instead_of_the_built_in_selector(tmp_path: Path) -> None:
    """Our plug-in contract: a pipeline's `select:ROLE` stage is served by whatever role of the
    `select` kind is installed; its choice and reason are the task's, the built-in never runs.
    This one always takes the first attempt, the wrong fix: with no revision allowed, the task
    is handed off with that choice."""
    stages = '["plan:planner", "retrieve:retriever", "code:coder", "verify:verifier", "select:first-picker"]'
    files = {**FILES, "codeloop.toml": f"[pipelines]\npicked = {stages}\n"}
    repo = PipelineRunner.make_repo(tmp_path / "repo", files)
    env = _env(tmp_path / "home", _plug_in(tmp_path / "plug-in"))
    options = ("--mode", "execute", "--attempts", "3", "--pipeline", "picked", "--max-revisions", "0")
    code, result = await _run(env, repo, *options)

    assert (code, result["status"], result["failure_class"]) == (3, "handed_off", "budget.revisions")
    assert [(c["attempt"], c["verdict"], c["chosen"]) for c in result["candidates"]] == [
        (1, "failed", True),
        (2, "failed", False),
        (3, "passed", False),
    ]
    assert result["candidates"][0]["reason"] == "the first attempt, always"
    assert result["patch"] == result["candidates"][0]["patch"] and "+ 1)" in result["patch"]
    assert "first-picker" in result["usage"]["by_role"] and "selector" not in result["usage"]["by_role"]
    assert "Chosen: attempt 1, the first attempt, always." in result["report"]
