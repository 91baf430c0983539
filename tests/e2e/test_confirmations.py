"""High-risk tool calls reach a person through the bus; nothing is approved by default."""

from pathlib import Path

import anyio
import pytest

from agents.client import watch_task
from agents.messages import ModelNames, TaskSubmitted
from agents.runtime.confirmations import answer
from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def _run_answering(pipeline, repo: Path, reply: bool | None, *, timeout_s: float = 60):
    """Run a task whose coder writes a protected file, answering its confirmation with `reply`
    (None: nobody answers), and collect the confirmation events."""
    task = TaskSubmitted(
        text="add a CI workflow",
        repo=str(repo),
        mode="write",
        confirm_timeout_s=timeout_s,
        models=ModelNames(default=model("protected_write")),
    )
    seen: list[dict] = []
    result = None
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            nonlocal result
            result = await pipeline(task)
            tg.cancel_scope.cancel()

        async def on_event(envelope) -> None:
            if envelope.kind == "event" and envelope.payload["name"].startswith("confirmation_"):
                seen.append(envelope.payload)
                if envelope.payload["name"] == "confirmation_requested" and reply is not None:
                    await answer(pipeline.bus, envelope.task_id, approve=reply)

        async def follow_all() -> None:
            # the task id is only known once submitted: follow every task's events
            sub = await pipeline.bus.js.subscribe("codeloop.events.*.confirmation_requested")
            async for msg in sub.messages:
                from bus.envelope import parse_envelope

                envelope = parse_envelope(msg.data)
                await on_event(envelope)
                tg.start_soon(watch_task, pipeline.bus, envelope.task_id, on_event)

        tg.start_soon(follow_all)
        with anyio.fail_after(240):
            await run()
    return result, seen


async def test_an_approved_protected_write_lands_in_the_patch(pipeline, tmp_path: Path) -> None:
    result, seen = await _run_answering(pipeline, make_repo(tmp_path / "repo", CALC), True)
    assert ".github/workflows/ci.yml" in result.files_changed  # pyright: ignore[reportAttributeAccessIssue] - the helper returns the task's result, set when it ended
    answered = [e for e in seen if e["name"] == "confirmation_answered"]
    assert answered and answered[0]["data"]["approved"] is True and answered[0]["data"]["by"] == "person"


async def test_a_denied_protected_write_does_nothing(pipeline, tmp_path: Path) -> None:
    result, seen = await _run_answering(pipeline, make_repo(tmp_path / "repo", CALC), False)
    assert ".github/workflows/ci.yml" not in result.files_changed  # pyright: ignore[reportAttributeAccessIssue] - the helper returns the task's result, set when it ended
    assert "not approve" in (result.answer or "")  # pyright: ignore[reportAttributeAccessIssue] - the helper returns the task's result, set when it ended
    answers = [e["data"]["approved"] for e in seen if e["name"] == "confirmation_answered"]
    assert answers and not any(answers)  # each attempt of the coder asked again, and heard no


async def test_an_unanswered_confirmation_is_declined_after_the_timeout(pipeline, tmp_path: Path) -> None:
    result, seen = await _run_answering(pipeline, make_repo(tmp_path / "repo", CALC), None, timeout_s=1.0)
    assert ".github/workflows/ci.yml" not in result.files_changed  # pyright: ignore[reportAttributeAccessIssue] - the helper returns the task's result, set when it ended
    answered = [e for e in seen if e["name"] == "confirmation_answered"]
    assert answered and answered[0]["data"] == {**answered[0]["data"], "approved": False, "by": "timeout"}
