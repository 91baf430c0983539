"""Continuing a task: a task handed off at its step budget goes on to `done` from where it
stopped, a done task goes on with a new instruction, the chain shows in `status` and `trace`, and
what cannot be continued is refused. A real nats-server and every real role; only the model's
decisions are scripted (`tests/e2e/scripted_continue.py`), and they decide from what the workspace
shows, so only a continuation that really starts from its parent's patch can finish."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import pytest

from agents.client import cancel_task, submit_task, watch_task
from agents.messages import TERMINAL_STATUSES, Budgets, ModelNames, TaskResult, TaskSubmitted
from agents.orchestrator.records import TaskRecords
from agents.replay.session import divergences_of, replay_submission
from codeloop.config.task_options import TaskOptions
from codeloop.continuing import ContinueRefused, continue_task
from codeloop.testing import make_repo
from tests.support.repos import CALC

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from pydantic import JsonValue

    from agents.workspace import SnapshotRef
    from bus.connection import Bus

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
REPO_ROOT = Path(__file__).parents[2]
STEPWISE = f"function:{Path(__file__).with_name('scripted_continue.py')}:stepwise"
TWO_BUGS = {**CALC, "calc/__init__.py": CALC["calc/__init__.py"].replace("a * b", "a ** b")}
"""`add` subtracts and `mul` raises to a power: two fixes, one model request each."""


class Pipeline(Protocol):
    """What these tests use of the `pipeline` fixture besides running a task."""

    bus: "Bus"
    nats_url: str
    auth_env: dict[str, str]


def _task(repo: Path, record: Path, *, max_steps: int = 30, model: str = STEPWISE) -> TaskSubmitted:
    return TaskSubmitted(
        text=f"add(2, 3) and mul(2, 3) give wrong results\nrecord: {record}",
        repo=str(repo),
        mode="write",
        models=ModelNames(default=model),
        budgets=Budgets(max_steps=max_steps),
    )


async def _codeloop(pipeline: Pipeline, home: Path, *args: str) -> "subprocess.CompletedProcess[bytes]":
    """`codeloop ARGS --nats URL` as a user runs it, against the test's serve."""
    env = {**os.environ, "CODELOOP_HOME": str(home), **pipeline.auth_env}
    env.pop("CODELOOP_MODEL", None)
    with anyio.fail_after(300):
        return await anyio.run_process(
            [sys.executable, "-m", "codeloop", *args, "--nats", pipeline.nats_url],
            env=env,
            cwd=REPO_ROOT,
            check=False,
            stdin=None,
        )


def _prompts(record: Path, role: str) -> list[str]:
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    return [entry["prompt"] for entry in lines if entry["role"] == role]


async def test_a_task_handed_off_at_its_step_budget_continues_to_done_and_applies_the_combined_patch(
    pipeline, tmp_path: Path
) -> None:
    """The issue's first acceptance point: `--max-steps 3` hands the task off with half the fix;
    `codeloop continue ID --max-steps 30 --apply` finishes it from that half, verified `passed`, and
    writes the whole (combined) patch into the checkout; `status` and `trace` show the chain."""
    repo = make_repo(tmp_path / "repo", TWO_BUGS)
    record = tmp_path / "prompts.jsonl"
    parent = await pipeline(_task(repo, record, max_steps=3))
    assert (parent.status, parent.failure_class) == ("handed_off", "budget.steps"), parent.report
    assert parent.patch and "+    return a + b" in parent.patch and "a * b" not in parent.patch
    assert (repo / "calc" / "__init__.py").read_text() == TWO_BUGS["calc/__init__.py"]

    home = tmp_path / "home"
    done = await _codeloop(
        pipeline, home, "continue", parent.task_id, "--max-steps", "30", "--apply", "--json"
    )
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout)
    assert result["status"] == "done" and result["verification"]["verdict"] == "passed", result["report"]
    assert result["parent_task_id"] == parent.task_id and result["task_id"] != parent.task_id
    assert "+    return a + b" in result["patch"] and "+    return a * b" in result["patch"]
    assert result["apply"]["applied"] is True
    module = (repo / "calc" / "__init__.py").read_text()
    assert "return a + b" in module and "return a * b" in module
    # The new task's roles were told what the parent did; its plan revised the parent's.
    coder = _prompts(record, "coder")[-1]
    assert f"continues task {parent.task_id}, which ended handed_off (budget.steps)" in coder
    assert "Its changes are already in the workspace (calc/__init__.py)" in coder
    assert f"continues task {parent.task_id}" in _prompts(record, "planner")[-1]
    assert result["plan"]["revisions"][0]["reason"] == f"continued from task {parent.task_id}"
    # Fresh budgets: the parent's three requests do not count against the new task's thirty.
    assert result["steps"] < 30

    child = result["task_id"]
    shown = await _codeloop(pipeline, home, "status", child)
    assert shown.returncode == 0, shown.stderr.decode()
    assert re.search(
        rf"^  continues +{parent.task_id} \(which ended handed_off \(budget.steps\)\)$",
        shown.stdout.decode(),
        re.M,
    )
    shown = await _codeloop(pipeline, home, "status", parent.task_id)
    assert re.search(rf"^  continued by +{child}$", shown.stdout.decode(), re.M)
    traced = await _codeloop(pipeline, home, "trace", child, "--json")
    assert traced.returncode == 0, traced.stderr.decode()
    chain = json.loads(traced.stdout)["chain"]
    assert chain["parent_task_id"] == parent.task_id and chain["ancestors"] == [parent.task_id]
    traced = await _codeloop(pipeline, home, "trace", parent.task_id)
    assert f"continued by: {child}" in traced.stdout.decode()


async def test_a_done_task_continued_with_an_instruction_gives_a_patch_holding_both_changes(
    pipeline, tmp_path: Path
) -> None:
    """The function a console calls: after a `done` task, `continue_task(ID, "also handle the
    empty list")` makes a task whose patch holds the first change and the new one; it replays with
    no divergence, and a second continuation extends it to a chain of three."""
    repo = make_repo(tmp_path / "repo", TWO_BUGS)
    record = tmp_path / "prompts.jsonl"
    first = await pipeline(_task(repo, record))
    assert first.status == "done", first.report
    assert "empty" not in (first.patch or "")

    continued = await continue_task(pipeline.bus, first.task_id, text="also handle the empty list")
    assert continued.parent_task_id == first.task_id
    second = await _result_of(pipeline.bus, continued.task_id)
    assert second.status == "done", second.report
    assert second.parent_task_id == first.task_id
    assert "+    return a + b" in (second.patch or "") and "+    return a * b" in (second.patch or "")
    assert "+    if not values:" in (second.patch or "")
    assert sorted(second.files_changed) == ["calc/__init__.py", "calc/stats.py"]
    coder = _prompts(record, "coder")[-1]
    assert "Follow-up instruction: also handle the empty list" in coder
    assert "The person now asks:\nalso handle the empty list" in coder
    assert "ended done" in coder

    # A continued task replays like any other: from its record, which holds what it inherited.
    replayed = await pipeline(await replay_submission(pipeline.bus, continued.task_id), snapshot=False)
    assert replayed.status == "done" and replayed.patch == second.patch
    assert replayed.parent_task_id == first.task_id
    assert await divergences_of(pipeline.bus, replayed.task_id) == []

    third = await continue_task(pipeline.bus, continued.task_id, options=TaskOptions(max_steps=10))
    ended = await _result_of(pipeline.bus, third.task_id)
    assert ended.status == "done" and ended.patch == second.patch
    assert third.task.continuation is not None
    assert third.task.continuation.chain == [first.task_id, continued.task_id]
    assert third.task.budgets.max_steps == 10


async def test_an_unknown_task_and_a_running_one_are_refused_with_exit_2(pipeline, tmp_path: Path) -> None:
    """Our CLI contract: continuing an id no task has, or a task still running, is a usage error
    (exit 2) that says which; nothing is submitted. Once it ended (cancelled), `submit --continue`
    submits the continuation and prints its id."""
    home = tmp_path / "home"
    unknown = await _codeloop(pipeline, home, "continue", "nosuchtask")
    assert unknown.returncode == 2 and "no task nosuchtask to continue" in unknown.stderr.decode()

    repo = make_repo(tmp_path / "repo", TWO_BUGS)
    go = tmp_path / "go"
    busy = _task(repo, tmp_path / "prompts.jsonl", model=f"{STEPWISE.rpartition(':')[0]}:wait_for_go")
    busy = busy.model_copy(
        update={"text": f"{busy.text}\ngo: {go}", "snapshot": await _snapshot(pipeline, repo)}
    )
    envelope, _ = await submit_task(pipeline.bus, busy)
    records = await TaskRecords.open(pipeline.bus)
    with anyio.fail_after(400):  # the first task of a serve loads the embedding model
        while (state := await records.get(envelope.task_id)) is None or state.status not in {  # noqa: ASYNC110 - the serve moves it
            "coding",
            *TERMINAL_STATUSES,
        }:
            await anyio.sleep(0.2)
    assert state.status == "coding", state.result
    before = len(await records.all())
    running = await _codeloop(pipeline, home, "continue", envelope.task_id, "go on")
    assert running.returncode == 2
    assert f"task {envelope.task_id} is still running (coding)" in running.stderr.decode()
    with pytest.raises(ContinueRefused) as refused:
        await continue_task(pipeline.bus, envelope.task_id)
    assert refused.value.reason == "running"
    assert len(await records.all()) == before
    await cancel_task(pipeline.bus, envelope.task_id)
    go.touch()  # the coder's step finishes; the task ended cancelled meanwhile
    assert (await _result_of(pipeline.bus, envelope.task_id)).status == "cancelled"

    # `submit --continue`: the same continuation, submitted and not followed.
    wrong = await _codeloop(pipeline, home, "submit", "--continue", envelope.task_id, "--repo", str(repo))
    assert wrong.returncode == 2 and "leave out --repo" in wrong.stderr.decode()
    submitted = await _codeloop(
        pipeline, home, "submit", "--continue", envelope.task_id[:10], "go on", "--json"
    )
    assert submitted.returncode == 0, submitted.stderr.decode()
    printed = json.loads(submitted.stdout)
    assert printed["parent_task_id"] == envelope.task_id
    resumed = await _result_of(pipeline.bus, printed["task_id"])
    assert resumed.parent_task_id == envelope.task_id and resumed.status != "rejected"


async def _snapshot(pipeline: Pipeline, repo: Path) -> "SnapshotRef":
    from agents.workspace import capture_snapshot

    return await capture_snapshot(pipeline.bus, repo)


async def _result_of(bus: "Bus", task_id: str) -> TaskResult:
    with anyio.fail_after(180):
        final = await watch_task(bus, task_id, lambda e: None)
    return TaskResult.model_validate(final.payload)


async def test_the_tasks_server_continues_a_task_for_the_principal_that_submitted_it(
    pipeline, tmp_path: Path
) -> None:
    """The tasks server's `continue_task` does for an MCP client what `codeloop continue` does: a
    task handed off at its budget goes on to `done` with the combined patch. Only the principal
    that submitted the task may continue it, and only within the scopes its mode needs."""
    from mcp import Client

    from codeloop.services.tasks_backend import BusTasks
    from tool_servers.protocol.scopes import Scope
    from tool_servers.protocol.spec import ServerOptions
    from tool_servers.tasks.server import build_tasks_server

    make_repo(tmp_path / "root" / "calc", TWO_BUGS)
    backend = await BusTasks.open(pipeline.bus)

    def server(principal: str, scopes: frozenset[Scope] = frozenset(Scope)) -> "MCPServer[object]":
        options = ServerOptions(principal=principal, scopes=scopes)
        return build_tasks_server(tmp_path / "root", options, backend)  # pyright: ignore[reportArgumentType] - BusTasks.changes is an async generator function, which the protocol's iterator describes

    async def call(client: Client, name: str, **arguments: "JsonValue") -> dict[str, Any]:
        result = await client.call_tool(name, arguments)
        assert not result.is_error, result.content
        return result.structured_content or {}

    async def ended(client: Client, task_id: str) -> dict[str, Any]:
        with anyio.fail_after(300):
            while (view := await call(client, "wait_task", task_id=task_id, timeout_s=30))["result"] is None:
                pass
        return view

    async with Client(server("alice")) as alice:
        task = "add(2, 3) and mul(2, 3) give wrong results"
        first = await call(
            alice, "submit_task", task=task, repo="calc", mode="write", model=STEPWISE, max_steps=3
        )
        parent = await ended(alice, first["task_id"])
        assert parent["result"]["failure_class"] == "budget.steps"

        async with Client(server("bob")) as bob:
            theirs = await bob.call_tool("continue_task", {"task_id": first["task_id"]})
            assert theirs.is_error and (theirs.structured_content or {})["type"] == "not_found"
        async with Client(server("alice", frozenset({Scope.READ}))) as reader:
            narrow = await reader.call_tool("continue_task", {"task_id": first["task_id"]})
            assert narrow.is_error and (narrow.structured_content or {})["type"] == "permission_denied"
            assert "'write' scope" in (narrow.structured_content or {})["message"]

        continued = await call(alice, "continue_task", task_id=first["task_id"], max_steps=30)
        assert continued["parent_task_id"] == first["task_id"] and continued["status"] == "submitted"
        view = await ended(alice, continued["task_id"])
        assert view["parent_task_id"] == first["task_id"]
        result = view["result"]
        assert result["status"] == "done" and result["verification"]["verdict"] == "passed"
        assert "+    return a + b" in result["patch"] and "+    return a * b" in result["patch"]
        assert result["parent_task_id"] == first["task_id"]
        listed = await call(alice, "list_tasks")
        assert [t["task_id"] for t in listed["tasks"]] == [continued["task_id"], first["task_id"]]
