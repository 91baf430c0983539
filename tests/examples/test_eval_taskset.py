"""The starter evaluation task set in `examples/eval/` (format: docs/eval-taskset.md) is sound:
its repositories and gold files exist, every fail-to-pass test fails on the shipped tree and
passes after the gold patch (applied with `git apply`), pass-to-pass tests pass before and after,
explanation facts are in the code, and the scripted models solve the fix and add_test tasks."""

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.examples.harness import EXAMPLES, coder_prompt, copy_repo, pytest_on, run_coder, scripted

EVAL = EXAMPLES / "eval"
TASKS: list[dict[str, Any]] = [
    json.loads(line) for line in (EVAL / "tasks.jsonl").read_text().splitlines() if line
]
KINDS = {"localize": "read", "explain": "read", "fix": "execute", "add_test": "execute"}
CHECKS = {
    "localize": {"gold_files"},
    "explain": {"facts", "gold_files"},
    "fix": {"fail_to_pass", "pass_to_pass"},
    "add_test": {"fail_to_pass", "pass_to_pass"},
}
PATCHED = [t for t in TASKS if t["kind"] in ("fix", "add_test")]


async def outcomes(root: Path) -> dict[str, str]:
    """node id -> PASSED/FAILED/ERROR for every test pytest collects under `root`."""
    return (await pytest_on(root)).outcomes()


async def with_gold(task: dict[str, Any], dest: Path, into: dict[str, dict[str, str]]) -> None:
    root = copy_repo(EVAL / task["repo"], dest)
    await anyio.run_process(["git", "apply", str(EVAL / task["gold_patch"])], cwd=root)
    into[task["id"]] = await outcomes(root)


def test_the_task_set_has_four_tasks_of_each_kind_on_several_repositories() -> None:
    """The starter set promised: at least 16 tasks, four per kind, on 3+ shipped repositories."""
    assert len(TASKS) >= 16 and len({t["id"] for t in TASKS}) == len(TASKS)
    assert all(n >= 4 for n in Counter(t["kind"] for t in TASKS).values()) and set(
        Counter(t["kind"] for t in TASKS)
    ) == set(KINDS)
    assert len({t["repo"] for t in TASKS}) >= 3
    for task in TASKS:
        assert task["mode"] == KINDS[task["kind"]], task["id"]
        assert CHECKS[task["kind"]] <= set(task["checks"]), task["id"]
        assert task["text"].strip() and (EVAL / task["repo"] / "pyproject.toml").is_file(), task["id"]


def test_gold_files_exist_and_explanation_facts_are_stated_by_the_code() -> None:
    """A gold file or fact nobody could find would make the task unwinnable."""
    for task in TASKS:
        for path in task["checks"].get("gold_files", []):
            assert (EVAL / task["repo"] / path).is_file(), (task["id"], path)
        gold_text = "".join(
            (EVAL / task["repo"] / p).read_text() for p in task["checks"].get("gold_files", [])
        )
        for fact in task["checks"].get("facts", []):
            assert fact.lower() in gold_text.lower(), (task["id"], fact)


@pytest.mark.anyio
@pytest.mark.slow
async def test_fail_to_pass_tests_fail_on_the_shipped_tree_and_pass_after_the_gold_patch(
    tmp_path: Path,
) -> None:
    """The core of a fix or add_test task: the gold patch turns the failing tests green while
    the pass-to-pass tests stay green."""
    before: dict[str, dict[str, str]] = {}
    after: dict[str, dict[str, str]] = {}

    async def shipped(repo: str) -> None:
        before[repo] = await outcomes(EVAL / repo)

    async with anyio.create_task_group() as tg:
        for repo in {t["repo"] for t in PATCHED}:
            tg.start_soon(shipped, repo)
        for task in PATCHED:
            tg.start_soon(with_gold, task, tmp_path / task["id"], after)
    for task in PATCHED:
        checks = task["checks"]
        for node in checks["fail_to_pass"]:
            assert before[task["repo"]].get(node, "MISSING") != "PASSED", (task["id"], node)
            assert after[task["id"]].get(node) == "PASSED", (task["id"], node)
        for node in checks["pass_to_pass"]:
            assert before[task["repo"]].get(node) == "PASSED", (task["id"], node)
            assert after[task["id"]].get(node) == "PASSED", (task["id"], node)


@pytest.mark.anyio
@pytest.mark.parametrize("task", PATCHED, ids=[t["id"] for t in PATCHED])
async def test_the_scripted_fix_model_solves_the_task(task: dict[str, Any], tmp_path: Path) -> None:
    """`--model function:examples/models/scripted.py:fix` runs the starter set's fix and add_test
    tasks to a passing state through real MCP servers (so `codeloop eval` can run with no LLM)."""
    root = copy_repo(EVAL / task["repo"], tmp_path / "repo")
    with anyio.fail_after(150):
        await run_coder(scripted("fix"), root, coder_prompt(task["text"], []), mode=task["mode"])
    after = await outcomes(root)
    checks = task["checks"]
    assert all(after.get(node) == "PASSED" for node in checks["fail_to_pass"] + checks["pass_to_pass"]), after
    changed = (await anyio.run_process(["git", "status", "--porcelain"], cwd=root)).stdout.decode()
    assert ("tests/" in changed) == (task["kind"] == "add_test"), changed
    shutil.rmtree(root)


READ_TASKS = [t for t in TASKS if t["mode"] == "read"]


@pytest.mark.anyio
@pytest.mark.parametrize("task", READ_TASKS, ids=[t["id"] for t in READ_TASKS])
async def test_the_scripted_model_answers_the_read_tasks(task: dict[str, Any], tmp_path: Path) -> None:
    """In read mode the scripted model names a gold file first and states the explanation's
    facts, so a scripted `codeloop eval` of the starter set has localisation and fact hits."""
    root = copy_repo(EVAL / task["repo"], tmp_path / "repo")
    with anyio.fail_after(60):
        run = await run_coder(scripted("fix"), root, coder_prompt(task["text"], []), mode="read")
    first = run.output.split("\n", 1)[0]
    named = [p for p in first.removeprefix("The code this is about is in ").rstrip(".").split(", ")]
    assert named[0] in task["checks"]["gold_files"], first
    assert all(fact.lower() in run.output.lower() for fact in task["checks"].get("facts", [])), run.output
