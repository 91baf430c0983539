"""The JavaScript reviewer (examples/roles/js_reviewer): a `node` process with the official NATS
packages, speaking only the bus contract and `codeloop schema`, joins a running serve as the
`js-reviewer` role. The secure pipeline with it gives the security reviewer's outcome; `codeloop
roles` shows the worker with its stats; a worker and an orchestrator that speak different schema
versions refuse each other, each saying so."""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.e2e.scripted import PLANTED_KEY
from tests.processes import ready_process
from tests.roles.conftest import ROOT
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
EXAMPLE = ROOT / "examples" / "roles" / "js_reviewer"
SECURE_JS = ["plan:planner", "retrieve:retriever", "code:coder", "review:js-reviewer", "verify:verifier"]


@pytest.fixture(scope="module")
def js_reviewer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example in a directory of its own with its npm packages installed (`npm install`)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed: the JavaScript reviewer is part of the suite")
    where = tmp_path_factory.mktemp("js-reviewer")
    for name in ("package.json", "reviewer.mjs", "rules.mjs"):
        shutil.copy(EXAMPLE / name, where / name)
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=where,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return where


async def _codeloop(runner, home: Path, *args: str, bus: bool = True) -> tuple[int, str, str]:
    env = {**os.environ, "CODELOOP_HOME": str(home), **runner.auth_env}
    nats = ("--nats", runner.nats_url) if bus else ()
    done = await anyio.run_process(
        [sys.executable, "-m", "codeloop", *args, *nats], env=env, cwd=ROOT, check=False
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@asynccontextmanager
async def _node_worker(where: Path, runner, schema: Path) -> AsyncIterator[tuple[anyio.abc.Process, dict]]:
    env = {**os.environ, **runner.auth_env}
    command = ["node", "reviewer.mjs", "--nats", runner.nats_url, "--schema", str(schema), "--ack-wait", "10"]
    async with ready_process(command, env=env, cwd=where) as ready:
        yield ready


async def test_the_js_reviewer_joins_a_serve_and_reviews_like_the_python_one(
    js_reviewer: Path, security_reviewer_installed, fixture_roles_installed, tmp_path: Path
) -> None:
    from codeloop.testing import running_pipeline

    repo = make_repo(
        tmp_path / "repo", {**CALC, "codeloop.toml": f"[pipelines]\nsecure-js = {json.dumps(SECURE_JS)}\n"}
    )
    home = tmp_path / "home"
    async with running_pipeline(tmp_path / "state") as runner:
        schema = tmp_path / "schema.json"
        code, _, err = await _codeloop(runner, home, "schema", "-o", str(schema), bus=False)
        assert code == 0, err

        # A worker built against another schema version refuses this bus, saying why.
        newer = tmp_path / "schema-v2.json"
        newer.write_text(json.dumps({**json.loads(schema.read_text()), "schema_version": 2}))
        refused = await anyio.run_process(
            ["node", "reviewer.mjs", "--nats", runner.nats_url, "--schema", str(newer)],
            cwd=js_reviewer,
            env={**os.environ, **runner.auth_env},
            check=False,
        )
        assert refused.returncode == 2
        assert (
            "the orchestrator on this bus speaks message schema version 1; this js-reviewer worker speaks 2"
            in (refused.stderr.decode())
        )

        async with _node_worker(js_reviewer, runner, schema) as (_, ready):
            assert ready["role"] == "js-reviewer" and ready["schema_version"] == 1
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
                "secure-js",
                "--json",
            )
            assert code == 0, err
            result = json.loads(out)
            assert result["status"] == "done" and result["verification"]["verdict"] == "passed"
            assert [(r["role"], r["verdict"]) for r in result["reviews"]] == [
                ("js-reviewer", "request_changes"),
                ("js-reviewer", "approve"),
            ]
            assert [(f["rule"], f["path"], f["line"]) for f in result["reviews"][0]["findings"]] == [
                ("hardcoded-secret", "calc/__init__.py", 2)
            ]
            assert result["revisions"] == 1 and PLANTED_KEY not in result["patch"]

            code, out, err = await _codeloop(runner, home, "roles", "--json")
            assert code == 0, err
            workers = [w for w in json.loads(out)["other_workers"] if w["role"] == "js-reviewer"]
            assert [(w["stage_kind"], w["compatible"], w["requests"], w["errors"]) for w in workers] == [
                ("review", True, 2, 0)
            ]
            assert workers[0]["id"] == ready["service_id"]


async def test_an_orchestrator_refuses_a_worker_of_another_schema_version_and_says_so(
    fixture_roles_installed, tmp_path: Path
) -> None:
    """A worker of the role that speaks version 2 is no worker: the task waits, naming the refusal."""
    from nats.micro import add_service

    from agents.client import cancel_task, submit_task
    from agents.messages import PipelineChoice, TaskSubmitted
    from agents.orchestrator.records import TaskRecords
    from bus.discovery import META_KIND, META_ROLE, META_SCHEMA
    from codeloop.testing import running_pipeline

    async with running_pipeline(tmp_path / "state", roles=("orchestrator", "scripted-coder")) as runner:
        service = await add_service(
            runner.bus.nc,
            name="future-reviewer",
            version="9.0.0",
            metadata={META_ROLE: "future-reviewer", META_KIND: "review", META_SCHEMA: "2"},
        )
        try:
            choice = PipelineChoice(name="future", stages=["code:scripted-coder", "review:future-reviewer"])
            envelope, _ = await submit_task(
                runner.bus,
                TaskSubmitted(text="t", repo=str(make_repo(tmp_path / "repo", CALC)), pipeline=choice),
            )
            records = await TaskRecords.open(runner.bus)
            with anyio.fail_after(5):
                # The mark is a record in the KV bucket: polled, as `codeloop status` would read it.
                while (state := await records.get(envelope.task_id)) is None or state.waiting_for is None:  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            assert state.waiting_for == "future-reviewer"
            await cancel_task(runner.bus, envelope.task_id)
        finally:
            await service.stop()
        from agents.client import watch_task

        events = []
        await watch_task(runner.bus, envelope.task_id, events.append)
        waiting = [
            e.payload["message"] for e in events if e.kind == "event" and e.payload["name"] == "waiting"
        ]
        assert waiting[0] == (
            "waiting for a worker of role future-reviewer (refused 1 worker(s) speaking schema version 2; "
            "this orchestrator speaks 1)"
        )
