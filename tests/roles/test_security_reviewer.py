"""The security reviewer plug-in in a `secure` pipeline: its first review requests changes for a
hard-coded API key, the coder's revision removes it, the second review approves, the verifier
passes; the result shows both rounds and a replay reproduces them. On the same serve: a pipeline
naming a role that is not installed is refused at submission, and a task whose role has no live
worker says it is waiting for one."""

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.e2e.scripted import PLANTED_KEY
from tests.roles.conftest import ROOT, SECURE
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CONFIG = f"""\
[pipelines]
secure = {json.dumps(SECURE)}
ghost = ["plan:planner", "code:coder", "review:no-such-reviewer"]
lonely = ["echo:echo"]
"""


async def _codeloop(runner, home: Path, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "CODELOOP_HOME": str(home), **runner.auth_env}
    done = await anyio.run_process(
        [sys.executable, "-m", "codeloop", *args, "--nats", runner.nats_url], env=env, cwd=ROOT, check=False
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_secure_pipeline_review_rounds_replay_refusal_and_waiting(
    security_reviewer_installed, tmp_path: Path
) -> None:
    from agents.client import watch_task
    from agents.orchestrator.records import TaskRecords
    from codeloop.testing import running_pipeline

    repo = make_repo(tmp_path / "repo", {**CALC, "codeloop.toml": CONFIG})
    home = tmp_path / "home"
    async with running_pipeline(tmp_path / "state") as runner:
        assert "security-reviewer" in runner.roles
        # Installed from its entry point, a live worker with its stats.
        code, out, err = await _codeloop(runner, home, "roles", "--json")
        assert code == 0, err
        listed = {r["name"]: r for r in json.loads(out)["installed"]}
        reviewer = listed["security-reviewer"]
        assert reviewer["stage_kind"] == "review" and not reviewer["builtin"]
        assert reviewer["distribution"] == "codeloop-security-reviewer"
        assert [w["compatible"] for w in reviewer["workers"]] == [True]
        assert {"planner", "retriever", "coder", "verifier"} <= {n for n, r in listed.items() if r["builtin"]}

        code, out, err = await _codeloop(
            runner,
            home,
            "run",
            "add(2, 3) returns -1 instead of 5",
            "--repo",
            str(repo),
            "--mode",
            "write",
            "--model",
            model("secret_then_clean"),
            "--pipeline",
            "secure",
            "--json",
        )
        assert code == 0, err
        result = json.loads(out)
        assert result["status"] == "done" and result["verification"]["verdict"] == "passed"
        rounds = result["reviews"]
        assert [(r["role"], r["verdict"]) for r in rounds] == [
            ("security-reviewer", "request_changes"),
            ("security-reviewer", "approve"),
        ]
        first = rounds[0]["findings"]
        assert [(f["rule"], f["path"]) for f in first] == [("hardcoded-secret", "calc/__init__.py")]
        assert result["revisions"] == 1
        assert "a + b" in result["patch"] and PLANTED_KEY not in result["patch"]
        assert PLANTED_KEY not in out  # the finding shows where the key was, never the key

        # The worker's stats count both reviews.
        code, out, _ = await _codeloop(runner, home, "roles", "--json")
        reviewer = {r["name"]: r for r in json.loads(out)["installed"]}["security-reviewer"]
        assert sum(w["requests"] for w in reviewer["workers"]) == 2

        code, out, err = await _codeloop(runner, home, "replay", result["task_id"], "--json")
        assert code == 0, err
        replayed = json.loads(out)
        # Recordings are redacted, so the first attempt's key comes back masked: the write that
        # carried it, and the revision's read of that file, differ only in size; the reviewer flags
        # the masked key just the same.
        assert [(d["step_id"], d["tool"], d["what"]) for d in replayed["divergences"]] == [
            ("03-code", "write_file", "the tool's result differs (in bytes_written)"),
            ("05-code", "read_file", "the tool's result differs (in size)"),
        ], out
        assert replayed["status"] == "done" and replayed["patch"] == result["patch"]
        assert [(r["verdict"], [f["rule"] for f in r["findings"]]) for r in replayed["reviews"]] == [
            (r["verdict"], [f["rule"] for f in r["findings"]]) for r in rounds
        ]

        # A role nobody installed and no worker serves: refused before anything is submitted.
        code, out, err = await _codeloop(
            runner, home, "submit", "x", "--repo", str(repo), "--pipeline", "ghost"
        )
        assert code == 2 and "no-such-reviewer" in err and "not installed" in err, err
        # An impossible order: refused as a usage error too.
        (repo / "codeloop.toml").write_text('[pipelines]\nbackwards = ["verify:verifier", "code:coder"]\n')
        code, _, err = await _codeloop(
            runner, home, "submit", "x", "--repo", str(repo), "--pipeline", "backwards"
        )
        assert code == 2 and "cannot come after a verify stage" in err, err
        (repo / "codeloop.toml").write_text(CONFIG)

        # Installed but not running in this serve: the task says what it waits for.
        code, out, err = await _codeloop(
            runner, home, "submit", "hello", "--repo", str(repo), "--pipeline", "lonely"
        )
        assert code == 0, err
        task_id = out.strip()
        records = await TaskRecords.open(runner.bus)
        with anyio.fail_after(5):
            # The mark is a record in the KV bucket: polled, as `codeloop status` would read it.
            while (state := await records.get(task_id)) is None or state.waiting_for != "echo":  # noqa: ASYNC110
                await anyio.sleep(0.1)
        code, out, err = await _codeloop(runner, home, "status", task_id, "--json")
        assert json.loads(out)["waiting_for"] == "echo" and "waiting for a worker of role echo" in err
        code, _, err = await _codeloop(runner, home, "cancel", task_id)
        assert code == 0, err
        events = []
        with anyio.fail_after(30):
            await watch_task(runner.bus, task_id, events.append)
        waiting = [e.payload for e in events if e.kind == "event" and e.payload["name"] == "waiting"]
        assert waiting[0]["message"] == "waiting for a worker of role echo"
        assert waiting[0]["data"]["role"] == "echo" and waiting[0]["data"]["waiting"] is True
