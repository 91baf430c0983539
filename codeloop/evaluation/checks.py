"""Judging one task's outcome: the row `results.jsonl` holds for it (fields: docs/evaluation.md).

Tests are run here, independently of the pipeline's own verifier, with plain `pytest` on a
throw-away copy of the task's repository with the patch applied, in the sandbox and the
repository's project environment, as the verifier's were (`codeloop.evaluation.sandboxed`).
`judge` runs in a worker thread of the evaluation's event loop, which runs the sandbox.
"""

import re
import shutil
import subprocess
from pathlib import Path

import anyio.from_thread

from agents.failures import FailureClass, blame
from codeloop.config.environment import tool_server_config
from codeloop.config.project_environment import workspace_environment_settings
from codeloop.evaluation.rows import CheckedTests, EvalRow, PipelineFields
from codeloop.evaluation.runner import Outcome
from codeloop.evaluation.sandboxed import run_pytest
from codeloop.evaluation.taskset import EvalTask

LOCALIZE_K = 3
"""A localize task is resolved when a gold file is among the first LOCALIZE_K files named."""
HITS_AT = (1, 3, 5)
TEST_TIMEOUT_S = 300
REPORT_CHARS = 2000
"""The pipeline's report for a person, trimmed: enough to see why a task ended as it did."""
PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z]{1,8})\b")
OUTCOME_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+)", re.M)
DIFF_FILE = re.compile(r"^\+\+\+ b/(\S+)", re.M)


def judge(outcome: Outcome, scratch: Path) -> EvalRow:
    """The task's row: the pipeline's figures plus this module's checks and the verdict."""
    task, result = outcome.task, outcome.result
    row: EvalRow = {
        **_pipeline_fields(outcome),
        "localisation": None,
        "facts": None,
        "tests": None,
        "resolved": False,
    }
    answer = (result.answer or "") if result else ""
    context_files = list((result.context or {}).get("files", [])) if result else []
    answer_files = cited_files(answer, outcome.repo) if answer else []
    gold = gold_files(task)
    row["localisation"] = (
        {
            "gold_files": gold,
            "context_files": context_files[:10],
            "answer_files": answer_files[:10],
            "context_hits": hits(context_files, gold),
            "answer_hits": hits(answer_files, gold),
        }
        if gold
        else None
    )
    facts = task.checks.facts
    stated = [f for f in facts if f.lower() in answer.lower()]
    row["facts"] = {"stated": stated, "missing": [f for f in facts if f not in stated]} if facts else None
    if task.kind in ("fix", "add_test") and outcome.repo.is_dir():
        patch = result.patch if result else None
        row["tests"] = run_checked_tests(task, outcome.repo, patch, scratch / task.id / "checked")
    row["resolved"] = resolved(task, row, answer_files or context_files)
    return row


def _pipeline_fields(outcome: Outcome) -> PipelineFields:
    task, result = outcome.task, outcome.result
    if result is None:
        failure = FailureClass.ENV_INFRA.value
        usage = {}
    else:
        failure = result.failure_class
        usage = result.usage or {}
    cost = usage.get("cost_usd")
    return {
        "id": task.id,
        "kind": task.kind,
        "mode": task.mode,
        "task_id": result.task_id if result else None,
        "status": result.status if result else "error",
        "failure_class": failure,
        "blame": _blame(failure),
        "error": outcome.error,
        "patch": result.patch if result else None,
        "answer": result.answer if result else None,
        "report": (result.report or "")[:REPORT_CHARS] if result else None,
        "files_changed": list(result.files_changed) if result else [],
        "verdict": result.verification.verdict if result else None,
        "steps": result.steps if result else 0,
        "revisions": result.revisions if result else 0,
        "requests": int(usage.get("requests", 0)),
        "input_tokens": int(usage.get("input_tokens", 0)),
        "output_tokens": int(usage.get("output_tokens", 0)),
        "tokens": int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0)),
        "tool_calls": int(usage.get("tool_calls", 0)),
        "cost_usd": float(cost) if cost is not None else None,
        "wall_s": round(outcome.wall_s, 3),
        "trace_id": result.trace_id if result else None,
    }


def _blame(failure: str | None) -> str | None:
    if failure is None:
        return None
    try:
        return blame(failure)
    except ValueError:
        return "ambiguous"


def resolved(task: EvalTask, row: EvalRow, named: list[str]) -> bool:
    """Solved per kind (docs/eval-taskset.md): localize hits@k, explain every fact, fix and
    add_test every checked test passing on the patched tree."""
    if task.kind == "localize":
        gold = set(gold_files(task))
        return any(path in gold for path in named[:LOCALIZE_K])
    if task.kind == "explain":
        return row["status"] == "done" and bool(row["facts"]) and not row["facts"]["missing"]
    tests = row["tests"]
    return bool(tests and tests["patched"] and tests["total"] and tests["passed"] == tests["total"])


def gold_files(task: EvalTask) -> list[str]:
    """The task's gold files; for a fix without them, the non-test files its gold patch changes."""
    if task.checks.gold_files:
        return list(task.checks.gold_files)
    if task.kind == "fix" and task.gold_patch:
        path = task.base_dir / task.gold_patch
        if path.is_file():
            changed = DIFF_FILE.findall(path.read_text(encoding="utf-8", errors="replace"))
            return [p for p in changed if not p.startswith("tests/")]
    return []


def cited_files(answer: str, repo: Path) -> list[str]:
    """Repository files the answer names, in the order it first names them."""
    seen: list[str] = []
    for match in PATH.finditer(answer):
        path = match.group(1).lstrip("./")
        if path not in seen and (repo / path).is_file():
            seen.append(path)
    return seen


def hits(ranked: list[str], gold: list[str]) -> dict[str, bool]:
    return {f"@{k}": any(path in gold for path in ranked[:k]) for k in HITS_AT}


def run_checked_tests(task: EvalTask, repo: Path, patch: str | None, work: Path) -> CheckedTests:
    """Outcome of each checked node id on a copy of `repo` with `patch` applied (the shipped
    tree when there is no patch): PASSED, FAILED, ERROR, SKIPPED, missing or timeout."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(repo, work, symlinks=True)
    applied = None
    if patch:
        done = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", "-"],
            input=patch,
            text=True,
            cwd=work,
            capture_output=True,
        )
        applied = done.returncode == 0
    wanted = {"fail_to_pass": task.checks.fail_to_pass, "pass_to_pass": task.checks.pass_to_pass}
    nodes = [n for ids in wanted.values() for n in ids]
    found = _pytest(work, nodes, dated=task.repo_path.is_file()) if applied is not False else {}
    by_check = {name: {n: found.get(n, "missing") for n in ids} for name, ids in wanted.items()}
    passed = sum(outcome == "PASSED" for ids in by_check.values() for outcome in ids.values())
    shutil.rmtree(work, ignore_errors=True)
    return {
        "fail_to_pass": by_check["fail_to_pass"],
        "pass_to_pass": by_check["pass_to_pass"],
        "patched": bool(applied),
        "patch_applied": applied,
        "passed": passed,
        "total": len(nodes),
    }


def _pytest(root: Path, nodes: list[str], *, dated: bool) -> dict[str, str]:
    """Run the test files the node ids are in (a missing node id would abort a run of ids), in the
    sandbox and the project environment; `dated`: the copy's git history is the task's own (a
    bundle), so its dependency files resolve as of their last commit, as the pipeline's did."""
    files = sorted({n.split("::", 1)[0] for n in nodes if (root / n.split("::", 1)[0]).is_file()})
    if not files:
        return {}
    settings = workspace_environment_settings(root)
    if not dated:
        # The tree copy's commit was made when the run started: the pipeline resolved as of the newest.
        settings = settings.model_copy(update={"index_date": None})
    args = ["-q", "-rA", "-p", "no:cacheprovider", *files]
    run = anyio.from_thread.run(
        lambda: run_pytest(
            root,
            args,
            settings=settings,
            policy=tool_server_config().sandbox_policy,
            timeout_s=TEST_TIMEOUT_S,
        )
    )
    if run.problem is not None:
        return {n: run.problem.partition(":")[0] for n in nodes}
    if run.timed_out:
        return {n: "timeout" for n in nodes}
    return {node: status for status, node in OUTCOME_LINE.findall(run.stdout)}
