"""One task, five ways in: `codeloop run`, `codeloop submit`, the tasks server's `submit_task`,
`codeloop eval` and `codeloop swebench --model`, given the same options (the same text, mode and
model; the budgets and `[verification] require` from the user's file), submit the same task.

A real serve running only the orchestrator takes each submission; the test reads the task's
record as the orchestrator wrote it, cancels the task (nothing would ever do its first step) and
compares the records field by field. Only the repository (each entry point works on its own copy)
and the snapshot of it differ, and the principal (the tasks server's caller, else the local user).
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from mcp import Client

from agents.client import cancel_task
from agents.messages import TaskSubmitted
from agents.orchestrator.records import TaskRecords
from codeloop.services.tasks_backend import BusTasks
from codeloop.testing import PipelineRunner, eventually, make_repo, running_pipeline
from tests.e2e.conftest import model
from tests.support.cli import REPO_ROOT
from tests.support.repos import CALC
from tests.swebench import synthetic
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.tasks.server import build_tasks_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TEXT = "calc.add(2, 3) returns -1; it must return 5."
MODEL = model("secret_then_clean")
USER_CONFIG = """\
[budgets]
max_steps = 7
max_revisions = 1

[verification]
require = "passed"
"""
DIFFERS = {"repo", "snapshot"}
"""Each entry point submits its own copy of the repository (eval and swebench a scratch copy)."""
PRINCIPALS = {"tasks server": "local"}
"""Who submits: the tasks server's caller (here its `local` principal), the local user (None)
through every other entry point."""


class Submissions:
    """The tasks the orchestrator has records of, each taken once: its task as submitted."""

    def __init__(self, runner: PipelineRunner) -> None:
        self.runner = runner
        self.seen: set[str] = set()

    async def next(self) -> TaskSubmitted:
        """The next task to arrive (within a deadline), cancelled once its record is read."""
        records = await TaskRecords.open(self.runner.bus)

        async def arrived() -> Any:
            fresh = [s for s in await records.all() if s.task_id not in self.seen]
            return fresh[0] if fresh else None

        state = await eventually(arrived, timeout_s=120)
        self.seen.add(state.task_id)
        await cancel_task(self.runner.bus, state.task_id, reason="compared, not run")
        return state.task


def _env(tmp_path: Path, runner: PipelineRunner) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_MODEL")}
    return env | runner.auth_env | {"CODELOOP_HOME": str(tmp_path / "home")}


async def _start(env: dict[str, str], *args: str) -> Process:
    return await anyio.open_process(
        [sys.executable, "-m", "codeloop", *args], env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL
    )


async def _ended(process: Process, *, interrupt: bool = False) -> None:
    """Wait for `process` to end; `interrupt`: Ctrl-C it first (swebench would wait for graders)."""
    if interrupt:
        process.send_signal(signal.SIGINT)
    with anyio.fail_after(120):
        await process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()


async def _through_run(subs: Submissions, env: dict[str, str], repo: Path, nats: str) -> TaskSubmitted:
    process = await _start(
        env, "run", TEXT, "--repo", str(repo), "--mode", "write", "--model", MODEL, "--nats", nats
    )
    task = await subs.next()
    await _ended(process)
    return task


async def _through_submit(subs: Submissions, env: dict[str, str], repo: Path, nats: str) -> TaskSubmitted:
    process = await _start(
        env, "submit", TEXT, "--repo", str(repo), "--mode", "write", "--model", MODEL, "--nats", nats
    )
    task = await subs.next()
    await _ended(process)
    return task


async def _through_tasks_server(subs: Submissions, runner: PipelineRunner, repo: Path) -> TaskSubmitted:
    backend = await BusTasks.open(runner.bus)
    grant = ServerOptions(scopes=frozenset({Scope.READ, Scope.WRITE}))
    server = build_tasks_server(repo.parent, grant, backend)  # pyright: ignore[reportArgumentType] - BusTasks.changes is an async generator function, which the protocol's iterator describes
    async with Client(server) as client:
        arguments = {"task": TEXT, "repo": repo.name, "mode": "write", "model": MODEL}
        submitted = await client.call_tool("submit_task", arguments)
        assert not submitted.is_error, submitted.content
    return await subs.next()


async def _through_eval(subs: Submissions, env: dict[str, str], tmp_path: Path, nats: str) -> TaskSubmitted:
    taskset = tmp_path / "taskset"
    make_repo(taskset / "repos" / "calc", CALC)
    line = {"id": "same", "repo": "repos/calc", "kind": "fix", "mode": "write", "text": TEXT}
    (taskset / "tasks.jsonl").write_text(json.dumps(line) + "\n")
    out = tmp_path / "eval-out"
    process = await _start(env, "eval", str(taskset), "--model", MODEL, "--out", str(out), "--nats", nats)
    task = await subs.next()
    await _ended(process)
    return task


async def _through_swebench(
    subs: Submissions, env: dict[str, str], tmp_path: Path, nats: str
) -> TaskSubmitted:
    inputs = synthetic.write_inputs(tmp_path / "swebench")
    (first, *_) = [json.loads(line) for line in inputs["instances"].read_text().splitlines()]
    inputs["instances"].write_text(json.dumps({**first, "problem_statement": TEXT}) + "\n")
    process = await _start(
        env,
        "swebench",
        str(inputs["instances"]),
        "--repos",
        str(inputs["repos"]),
        "--specs",
        str(inputs["specs"]),
        "--model",
        MODEL,
        "--jobs",
        "0",  # grading only by remote workers, of which there are none: the run stops at solving
        "--out",
        str(tmp_path / "swebench-out"),
        "--nats",
        nats,
    )
    task = await subs.next()
    await _ended(process, interrupt=True)
    return task


async def test_every_entry_point_submits_the_same_task_for_the_same_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_home = tmp_path / "config"
    (config_home / "codeloop").mkdir(parents=True)
    (config_home / "codeloop" / "config.toml").write_text(USER_CONFIG)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))  # the tasks server runs in this process
    monkeypatch.delenv("CODELOOP_MODEL", raising=False)
    repo = make_repo(tmp_path / "root" / "calc", CALC)

    async with running_pipeline(tmp_path / "state", roles=("orchestrator",)) as runner:
        subs = Submissions(runner)
        env = _env(tmp_path, runner)
        nats = runner.nats_url
        tasks = {
            "run": await _through_run(subs, env, repo, nats),
            "submit": await _through_submit(subs, env, repo, nats),
            "tasks server": await _through_tasks_server(subs, runner, repo),
            "eval": await _through_eval(subs, env, tmp_path, nats),
            "swebench --model": await _through_swebench(subs, env, tmp_path, nats),
        }

    for name, task in tasks.items():
        assert task.principal == PRINCIPALS.get(name), name
    records = {
        name: task.model_dump(mode="json", exclude=DIFFERS | {"principal"}) for name, task in tasks.items()
    }
    expected = records["run"]
    # The options took effect: the model, the user file's budgets and its [verification] require.
    assert expected["text"] == TEXT and expected["mode"] == "write"
    assert MODEL in json.dumps(expected["models"])
    assert expected["budgets"]["max_steps"] == 7 and expected["budgets"]["max_revisions"] == 1
    assert expected["require_verified"] is True
    for name, record in records.items():
        differing = {
            key: (record.get(key), expected.get(key))
            for key in expected.keys() | record.keys()
            if record.get(key) != expected.get(key)
        }
        assert differing == {}, f"{name} submits another task than run: {differing}"
