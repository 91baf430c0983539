"""Following a submitted task as a user does: `status ID` as a page, `--patch`, unique id prefixes
in every command, a pending confirmation shown and approved with `codeloop approve`, and what a
typo'd or ended task id gets."""

import getpass
import json
import subprocess
from pathlib import Path

import anyio
import pytest

from agents.client import watch_task
from bus.connection import open_bus
from codeloop.config.serve_note import client_bus_config
from codeloop.testing import make_repo
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve
from tests.e2e.conftest import model
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CI = ".github/workflows/ci.yml"


async def _codeloop(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([*CODELOOP, *args], env=codeloop_env(home), check=False)


async def _wait_for_confirmation(home: Path, task_id: str) -> dict:
    """The task's `confirmation_requested` event, once it is published."""
    asked: dict = {}
    async with open_bus(client_bus_config(state_dir=home)) as bus, anyio.create_task_group() as tg:

        async def on_event(envelope) -> None:
            if envelope.kind == "event" and envelope.payload["name"] == "confirmation_requested":
                asked.update(envelope.payload["data"])
                tg.cancel_scope.cancel()

        tg.start_soon(watch_task, bus, task_id, on_event)
    return asked


async def test_an_approved_protected_write_ends_done_and_the_record_names_who_approved(
    tmp_path: Path,
) -> None:
    """An approval travels with the task to the verifier: the CI workflow a person approved is judged
    on its merits (the fix makes the failing test pass: `passed`), and the record says who approved
    which path. Meanwhile `status` shows the pending confirmation and the command that answers it."""
    home, repo = tmp_path / "home", make_repo(tmp_path / "repo", CALC)
    text = "fix add so tests/test_calc.py::test_add passes, and add a CI workflow running the tests"
    with anyio.fail_after(300):
        async with running_serve(home, "--pipeline", "auto", "--no-mcp"):
            submitted = await _codeloop(
                home,
                "submit",
                text,
                "--repo",
                str(repo),
                "--mode",
                "write",
                "--model",
                model("fix_with_ci_workflow"),
            )
            assert submitted.returncode == 0, submitted.stderr
            task_id = submitted.stdout.decode().strip()
            prefix = task_id[:7]
            asked = await _wait_for_confirmation(home, task_id)
            assert CI in asked["question"]
            waiting = (await _codeloop(home, "status", prefix)).stdout.decode()
            assert f"waiting for your answer: {asked['question']}" in waiting
            assert f"codeloop approve {task_id}" in waiting
            approved = await _codeloop(home, "approve", prefix)
            assert approved.returncode == 0 and asked["request_id"] in approved.stdout.decode()
            watched = await _codeloop(home, "watch", prefix)
            assert watched.returncode == 0, watched.stdout.decode()[-2000:]
            record = json.loads((await _codeloop(home, "status", prefix, "--json")).stdout)
            shown = (await _codeloop(home, "status", prefix)).stdout.decode()
            patch = await _codeloop(home, "status", prefix, "--patch")
            trace = await _codeloop(home, "trace", prefix)
    result = record["result"]
    assert result["status"] == "done" and result["verification"]["verdict"] == "passed", result["report"]
    assert result["failure_class"] is None and CI in result["files_changed"]
    by = f"{getpass.getuser()} with codeloop approve"
    assert [(a["path"], a["approved_by"]) for a in result["approvals"]] == [(CI, by)]
    assert [(a["path"], a["approved_by"]) for a in record["approvals"]] == [(CI, by)]
    for line in (
        f"task {task_id}",
        "status      done (verification passed)",
        "verdict     passed",
        f"files       {CI}, calc/__init__.py",
        f"approved    {CI} by {by}",
        "report:",
    ):
        assert line in shown, shown
    assert "model requests" in shown and "waiting for" not in shown
    assert patch.returncode == 0 and patch.stdout.decode().startswith("diff --git")
    applies = await anyio.run_process(
        ["git", "apply", "--check", "-"], input=patch.stdout, cwd=repo, check=False
    )
    assert applies.returncode == 0, applies.stderr
    assert trace.returncode == 0 and task_id in trace.stdout.decode()


async def test_a_typod_or_ended_task_id_is_an_error_saying_so(tmp_path: Path) -> None:
    """Our choice, as git and gh do: an id no task has is `error: no task ID` (exit 1) in every
    command that takes one, after a short grace instead of waiting forever; an ended task says how
    it ended; a prefix of several tasks is a usage error (exit 2)."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    repo.mkdir()
    with anyio.fail_after(120):
        async with running_serve(home, "--no-mcp"):
            ids = []
            for task_id in ("same-1", "same-2"):
                done = await _codeloop(home, "submit", "hi", "--repo", str(repo), "--task-id", task_id)
                assert done.returncode == 0, done.stderr
                ids.append(task_id)
                assert (await _codeloop(home, "watch", task_id)).returncode == 0
            unknown: dict[str, subprocess.CompletedProcess[bytes]] = {}

            async def ask(command: str) -> None:
                unknown[command] = await _codeloop(home, command, "deadbeef")

            async with anyio.create_task_group() as tg:  # each waits out the grace: side by side
                for command in ("watch", "status", "trace", "cancel", "approve", "deny"):
                    tg.start_soon(ask, command)
            cancelled = await _codeloop(home, "cancel", "same-1")
            approved = await _codeloop(home, "approve", "same-2")
            ambiguous = await _codeloop(home, "cancel", "same")
    for command, done in unknown.items():
        assert done.returncode == 1, command
        assert done.stderr.decode().startswith("error: no task deadbeef"), (command, done.stderr)
    assert cancelled.returncode == 1
    assert cancelled.stderr.decode() == "error: task same-1 has already ended (done): nothing to cancel\n"
    assert approved.returncode == 1 and b"has ended (done)" in approved.stderr
    assert ambiguous.returncode == 2 and b"fits 2 tasks (same-1, same-2)" in ambiguous.stderr
