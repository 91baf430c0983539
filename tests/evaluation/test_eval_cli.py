"""`codeloop eval` as a user runs it (docs/evaluation.md): the four files with figures that agree,
diagnose mode, --min-resolved, --rerun-failed, --save-failures, and an environment failure
(the sandbox made unavailable) counted as such, with a non-zero exit code."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from codeloop.evaluation.taskset import load_tasks
from tests.evaluation.conftest import FILES, SCRIPTED, EvalRun, run_eval
from tests.processes import processes_mentioning

pytestmark = pytest.mark.slow


def recomputed_resolved(row: dict[str, Any]) -> bool:
    """The per-kind definition of docs/evaluation.md, applied to the row's own fields."""
    if row["kind"] == "localize":
        loc = row["localisation"]
        named = loc["answer_files"] or loc["context_files"]
        return any(path in loc["gold_files"] for path in named[:3])
    if row["kind"] == "explain":
        return row["status"] == "done" and not row["facts"]["missing"]
    tests = row["tests"]
    outcomes = [*tests["fail_to_pass"].values(), *tests["pass_to_pass"].values()]
    return tests["patched"] and all(o == "PASSED" for o in outcomes)


def assert_consistent(run: EvalRun) -> None:
    """Rows, summary and both reports state the same figures."""
    assert all((run.out / name).is_file() for name in FILES)
    tasks = load_tasks(run.taskset)
    rows, summary = run.rows, run.summary
    assert [r["id"] for r in rows] == [t.id for t in tasks]
    for row, task in zip(rows, tasks, strict=True):
        assert row["resolved"] == recomputed_resolved(row), row["id"]
        if task.kind in ("fix", "add_test"):
            assert set(row["tests"]["fail_to_pass"]) == set(task.checks.fail_to_pass)
            assert row["tests"]["total"] == len(task.checks.fail_to_pass) + len(task.checks.pass_to_pass)
    resolved = sum(r["resolved"] for r in rows)
    assert summary["tasks"] == len(rows) and summary["resolved"] == resolved
    assert summary["resolved_rate"] == round(resolved / len(rows), 4)
    low, high = summary["resolved_ci95"]
    assert 0 <= low <= summary["resolved_rate"] <= high <= 1
    assert sum(summary["failure_classes"].values()) == len(rows) - resolved
    assert sum(k["tasks"] for k in summary["by_kind"].values()) == len(rows)
    assert sum(k["resolved"] for k in summary["by_kind"].values()) == resolved
    assert summary["completed"] == sum(r["status"] in ("done", "diagnosed") for r in rows)
    assert summary["handed_off"] == sum(r["status"] == "handed_off" for r in rows)
    assert summary["tests_passed"] == sum(r["tests"]["passed"] for r in rows if r["tests"])
    assert summary["tokens"]["total"] == sum(r["tokens"] for r in rows)
    assert summary["average_steps"] == round(sum(r["steps"] for r in rows) / len(rows), 3)
    located = [r["localisation"] for r in rows if r["localisation"]]
    assert summary["localisation"]["tasks"] == len(located)
    assert summary["localisation"]["context_hits"]["@3"] == round(
        sum(x["context_hits"]["@3"] for x in located) / len(located), 4
    )
    markdown, html = (run.out / "report.md").read_text(), (run.out / "report.html").read_text()
    headline = f"resolved: {resolved}/{len(rows)}"
    assert f"**{headline}" in markdown and f"resolved {resolved}/{len(rows)}" in html
    assert all(r["id"] in markdown and r["id"] in html for r in rows)
    assert (
        summary["fingerprints"]["taskset"] in json.dumps(summary)
        and len(summary["fingerprints"]["taskset"]) == 64
    )


def test_a_scripted_run_writes_four_files_whose_figures_agree(scripted_run: EvalRun) -> None:
    """The contract's four files, one row per task; the scripted model names the gold file and
    the facts, so the read tasks are resolved; no environment failure, so exit 0; summary.json
    records the configuration the run used and where each value came from."""
    assert scripted_run.done.returncode == 0, scripted_run.done.stderr[-3000:]
    assert_consistent(scripted_run)
    rows = {r["kind"]: r for r in scripted_run.rows}
    assert rows["localize"]["resolved"] and rows["explain"]["resolved"]
    assert rows["localize"]["localisation"]["answer_hits"]["@1"]
    assert all(r["trace_id"] and r["steps"] > 0 and r["tokens"] > 0 for r in rows.values())
    assert all(r["patch"] for r in rows.values() if r["kind"] in ("fix", "add_test") and r["resolved"])
    assert scripted_run.summary["environment_failures"] == 0
    # Priced usage flows from the roles into each row and the summary's cost figures.
    assert all(r["cost_usd"] and r["cost_usd"] > 0 for r in rows.values())
    cost = scripted_run.summary["cost_usd"]
    assert cost["total"] == pytest.approx(sum(r["cost_usd"] for r in scripted_run.rows), abs=1e-5)
    # The effective configuration, each value with its source, so two reports can be compared.
    configuration = scripted_run.summary["config"]["configuration"]
    assert configuration["models.coder"] == {
        "value": f"function:{SCRIPTED}:fix_priced",
        "source": "flag",
        "where": "--model",
    }
    assert configuration["budgets.max_steps"] == {"value": 30, "source": "default", "where": None}
    assert scripted_run.summary["config"]["budgets"]["max_steps"] == 30


def test_diagnose_mode_tests_the_shipped_tree_and_min_resolved_fails_the_run(diagnose_run: EvalRun) -> None:
    """Without a model nothing is patched: the checked tests run on the shipped tree (the
    fail-to-pass ones fail, the others pass), and a resolved rate under --min-resolved exits 1."""
    assert diagnose_run.done.returncode == 1 and "under --min-resolved" in diagnose_run.done.stderr
    assert_consistent(diagnose_run)
    assert diagnose_run.summary["config"]["diagnose"] and diagnose_run.summary["environment_failures"] == 0
    checked = [row for row in diagnose_run.rows if row["tests"]]
    assert checked, "no instance had its tests run"
    for row in diagnose_run.rows:
        assert row["status"] == "diagnosed" and row["patch"] is None, row
    for row in checked:
        fail_to_pass, pass_to_pass = row["tests"]["fail_to_pass"], row["tests"]["pass_to_pass"]
        assert not row["tests"]["patched"] and not row["resolved"] and fail_to_pass, row
        assert all(o != "PASSED" for o in fail_to_pass.values())
        assert all(o == "PASSED" for o in pass_to_pass.values())
    assert diagnose_run.rows[0]["localisation"]["context_files"]


def path_without_runsc(bin_dir: Path) -> str:
    """PATH with every directory holding runsc replaced by links to everything else in it."""
    bin_dir.mkdir()
    entries = []
    for entry in os.environ["PATH"].split(os.pathsep):
        directory = Path(entry)
        if not (directory / "runsc").exists():
            entries.append(entry)
            continue
        for tool in directory.iterdir():
            if tool.name != "runsc" and not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
        if str(bin_dir) not in entries:
            entries.append(str(bin_dir))
    return os.pathsep.join(entries)


def test_rerun_failed_with_the_sandbox_unavailable_reruns_only_the_failed_tasks_as_environment_failures(
    diagnose_run: EvalRun, tmp_path: Path
) -> None:
    """--rerun-failed runs only the unresolved tasks of the earlier run; with gVisor required and
    no runsc to be found, each fails as env.infra, blamed on the environment (not the model),
    and the exit code is 1. --save-failures appends them as task lines that load again."""
    failed = [r["id"] for r in diagnose_run.rows if not r["resolved"]]
    assert 0 < len(failed) < len(diagnose_run.rows)
    regressions = tmp_path / "regressions" / "tasks.jsonl"
    env = {"CODELOOP_SANDBOX": "gvisor", "PATH": path_without_runsc(tmp_path / "bin")}
    done = run_eval(
        tmp_path,
        str(diagnose_run.taskset),
        "--rerun-failed",
        str(diagnose_run.out),
        "--out",
        str(tmp_path / "out"),
        "--jobs",
        str(len(failed)),
        "--save-failures",
        str(regressions),
        env=env,
    )
    rerun = EvalRun(done, tmp_path / "out", diagnose_run.taskset)
    assert done.returncode == 1 and "environment reasons" in done.stderr, done.stderr[-3000:]
    assert [r["id"] for r in rerun.rows] == failed
    assert all(r["failure_class"] == "env.infra" and r["blame"] == "environment" for r in rerun.rows)
    summary = rerun.summary
    assert summary["environment_failures"] == len(failed)
    assert summary["failures_by_blame"] == {"model": 0, "environment": len(failed), "ambiguous": 0}
    saved = load_tasks(regressions)
    originals = {t.id: t for t in load_tasks(diagnose_run.taskset)}
    assert [t.id for t in saved] == failed
    assert all(t.repo_path == originals[t.id].repo_path for t in saved)
    assert processes_mentioning(tmp_path) == []


def test_usage_errors_exit_2_with_a_one_line_message(diagnose_run: EvalRun, tmp_path: Path) -> None:
    """A missing task set, or --out naming the run being re-run, is refused before anything runs."""
    missing = run_eval(tmp_path, str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no task file" in missing.stderr
    same = run_eval(
        tmp_path,
        str(diagnose_run.taskset),
        "--rerun-failed",
        str(diagnose_run.out),
        "--out",
        str(diagnose_run.out),
    )
    assert same.returncode == 2 and "--out must differ" in same.stderr
