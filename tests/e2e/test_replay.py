"""Recording and replay: a recorded task replayed reproduces its patch and verdict, a tool changed
between record and replay is reported as a divergence, and the exact replay executes no tool."""

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest

from agents.messages import Budgets, ModelNames, TaskSubmitted
from agents.replay.exact import exact_replay
from agents.replay.session import divergences_of, replay_submission
from agents.replay.store import load_runs, save_run
from agents.workspace.scratch import OWNER_SUFFIX
from codeloop.testing import make_repo
from codeloop.wiring.tools import InProcessTools
from tests.e2e.conftest import model
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
REPO_ROOT = Path(__file__).parents[2]


class ChangeableTools(InProcessTools):
    """The real in-process tool servers; with `change` set, the coder's servers see one more line in
    calc/__init__.py — a tool that answers differently than when the task was recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.change = False
        self.built = 0

    def servers(self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None) -> dict:
        self.built += 1
        if self.change and "write" in scopes:
            target = root / "calc" / "__init__.py"
            target.write_text(target.read_text() + "\n# changed after the recording\n")
        return super().servers(root, scopes, index_dir=index_dir)


@pytest.fixture
async def pipeline(tmp_path: Path) -> AsyncIterator[Callable]:
    """Every role of a serve in this process (tools: `ChangeableTools`, at `run.tools`) on a private
    embedded nats-server; yields `run(task, snapshot=True) -> TaskResult`."""
    from agents.client import submit_task, watch_task
    from agents.messages import TaskResult
    from agents.workspace import capture_snapshot
    from bus.actor import DeliveryPolicy
    from bus.config import BusConfig
    from bus.connection import open_bus
    from codeloop.config.serve_note import client_config_for
    from codeloop.wiring.process import RoleSetup, Workers, serve

    config = BusConfig(state_dir=tmp_path / "state")
    tools = ChangeableTools()
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        note = await tg.start(
            lambda task_status: serve(
                config,
                stop=stop,
                workers=Workers(policy=DeliveryPolicy(ack_wait_s=10)),
                setup=RoleSetup(tools=tools),
                task_status=task_status,
            )
        )
        client = client_config_for(config, note)
        async with open_bus(client) as bus:

            async def run(task: TaskSubmitted, *, snapshot: bool = True) -> TaskResult:
                if snapshot:
                    task = task.model_copy(update={"snapshot": await capture_snapshot(bus, Path(task.repo))})
                envelope, _ = await submit_task(bus, task)
                with anyio.fail_after(180):
                    final = await watch_task(bus, envelope.task_id, lambda e: None)
                return TaskResult.model_validate(final.payload)

            run.bus, run.tools, run.nats_url = bus, tools, note.nats_url
            # the embedded server's generated credentials, for the command-line clients of a test
            run.auth_env = {
                "CODELOOP_NATS_USER": client.user or "",
                "CODELOOP_NATS_PASSWORD": client.password or "",
            }
            yield run
        stop.set()


def _fix(repo: Path, mode: str = "write") -> TaskSubmitted:
    return TaskSubmitted(
        text="add(2, 3) returns -1 instead of 5",
        repo=str(repo),
        mode=mode,  # type: ignore[arg-type] - mode is a literal of each test, validated by pydantic
        models=ModelNames(default=model("fix")),
        budgets=Budgets(),
    )


async def test_a_replayed_task_reproduces_its_patch_and_verdict_with_no_divergence(
    pipeline, tmp_path: Path
) -> None:
    """Replay of an unchanged system: the recorded responses, the tools run again on a fresh
    workspace, the verifier judges the patch again: the same patch and verdict, no divergence."""
    repo = make_repo(tmp_path / "repo", CALC)
    original = await pipeline(_fix(repo))
    assert original.status == "done", original.report
    runs = await load_runs(pipeline.bus, original.task_id)
    assert [r.role for r in runs] == ["planner", "coder"]
    coder = runs[1]
    assert coder.outcome == "ok" and "## Task" in (coder.prompt or "")
    assert {t["name"] for t in coder.tools} >= {"read_file", "write_file"}
    observed = [e.tool for e in coder.entries if e.kind == "tool_result"]
    assert "read_file" in observed and observed[-1] == "write_file"
    assert len(coder.responses()) == len(observed) + 1 and coder.output == original.answer

    replayed = await pipeline(await replay_submission(pipeline.bus, original.task_id), snapshot=False)
    assert replayed.task_id != original.task_id
    assert replayed.status == original.status and replayed.patch == original.patch
    assert replayed.verification.verdict == original.verification.verdict
    assert await divergences_of(pipeline.bus, replayed.task_id) == []
    replay_runs = await load_runs(pipeline.bus, replayed.task_id)
    assert {r.replay_of for r in replay_runs} == {original.task_id}


async def test_a_tool_that_answers_differently_on_replay_is_reported_as_a_divergence(
    pipeline, tmp_path: Path
) -> None:
    """A tool changed between record and replay: the replay names the step, the call and what
    differed, with both observations trimmed."""
    repo = make_repo(tmp_path / "repo", CALC)
    original = await pipeline(_fix(repo))
    assert original.status == "done", original.report
    pipeline.tools.change = True
    replayed = await pipeline(await replay_submission(pipeline.bus, original.task_id), snapshot=False)
    divergences = await divergences_of(pipeline.bus, replayed.task_id)
    assert divergences, "the changed read_file was not reported"
    first = divergences[0]
    assert first.role == "coder" and first.tool == "read_file" and first.request == 1
    assert "content" in first.what and "changed after the recording" in first.replayed
    assert "changed after the recording" not in first.recorded
    assert first.step_id in {r.step_id for r in await load_runs(pipeline.bus, original.task_id)}


async def test_the_exact_replay_executes_no_tool_and_reproduces_every_run(pipeline, tmp_path: Path) -> None:
    """`--recorded-tools`: every run again from the recording — no tool server built, no scratch
    workspace made — so a changed tool makes no difference, and the result is the task's."""
    repo = make_repo(tmp_path / "repo", CALC)
    original = await pipeline(_fix(repo))
    assert original.status == "done", original.report
    pipeline.tools.change = True
    work = tmp_path / "state" / "work"
    listing = await _without_the_used_spare(work)
    built, mtime = pipeline.tools.built, work.stat().st_mtime_ns
    result, divergences = await exact_replay(pipeline.bus, original.task_id)
    assert divergences == []
    assert result.patch == original.patch and result.verification == original.verification
    assert pipeline.tools.built == built
    assert sorted(os.listdir(work)) == listing and work.stat().st_mtime_ns == mtime
    # A recording the run no longer agrees with (its last response gone) is a divergence, not a pass.
    coder = next(r for r in await load_runs(pipeline.bus, original.task_id) if r.role == "coder")
    last = coder.responses()[-1]
    await save_run(
        pipeline.bus, coder.model_copy(update={"entries": [e for e in coder.entries if e is not last]})
    )
    _, divergences = await exact_replay(pipeline.bus, original.task_id)
    assert [d.what for d in divergences][:2] == [
        f"the replay made model request {len(coder.responses())}; the recording has {len(coder.responses()) - 1}",
        "the run failed on replay",
    ]


async def test_the_replay_command_prints_the_result_with_its_divergences(pipeline, tmp_path: Path) -> None:
    """`codeloop replay TASK_ID --json` against a running bus: the shape of `run --json` plus
    `divergences`, the exit code of the replayed task's status."""
    repo = make_repo(tmp_path / "repo", CALC)
    original = await pipeline(_fix(repo))
    env = {**os.environ, "CODELOOP_HOME": str(tmp_path / "home"), **pipeline.auth_env}
    for extra in ([], ["--recorded-tools"]):
        done = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "codeloop",
                "replay",
                original.task_id,
                "--nats",
                pipeline.nats_url,
                "--json",
                *extra,
            ],
            env=env,
            cwd=REPO_ROOT,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()
        printed = json.loads(done.stdout)
        assert printed["divergences"] == [] and printed["patch"] == original.patch
        assert printed["status"] == "done" and {"verification", "usage", "report"} <= set(printed)
    missing = await anyio.run_process(
        [sys.executable, "-m", "codeloop", "replay", "no-such-task", "--nats", pipeline.nats_url],
        env=env,
        cwd=REPO_ROOT,
        check=False,
    )
    assert missing.returncode == 1 and "error: no task no-such-task" in missing.stderr.decode()


async def _without_the_used_spare(work: Path) -> list[str]:
    """`work`'s entries once the spare sandbox the task's verification used is removed: it is closed
    after the result is published (the next spare already being prepared), so a listing taken at
    once may still hold it and lose it during whatever the test does next."""

    def settled() -> bool:
        """One spare left, and its owner mark beside it (a closed spare's mark goes after it)."""
        entries = [e for e in os.listdir(work) if e.startswith("spare-")]
        sandboxes = {e for e in entries if not e.endswith(OWNER_SUFFIX)}
        marks = {e.removesuffix(OWNER_SUFFIX) for e in entries if e.endswith(OWNER_SUFFIX)}
        return len(sandboxes) <= 1 and marks == sandboxes

    with anyio.fail_after(60):
        while not settled():  # noqa: ASYNC110 - the verifier's own task group removes it
            await anyio.sleep(0.05)
    return sorted(os.listdir(work))
