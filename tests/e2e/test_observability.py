"""What a finished task's events say about it: every tool call with its outcome and duration,
every model call with its step, and never the files' contents."""

import hashlib
import json
from pathlib import Path

import pytest

from agents.messages import ModelNames, TaskSubmitted
from codeloop.cli.trace import read_task_events
from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _events(envelopes, name: str) -> list[dict]:
    return [e.payload["data"] for e in envelopes if e.kind == "event" and e.payload["name"] == name]


async def test_the_tool_calls_of_a_fixed_task_are_events_with_outcome_duration_and_no_contents(
    pipeline, tmp_path: Path
) -> None:
    """Every role's tool calls are `tool_call` events naming server, tool, outcome and duration,
    with the task's trace id, step and role; written contents appear only as size and sha256."""
    repo = make_repo(tmp_path / "repo", CALC)
    task = TaskSubmitted(
        text="add(2, 3) returns -1 instead of 5",
        repo=str(repo),
        mode="execute",
        models=ModelNames(default=model("fix")),
    )
    result = await pipeline(task)
    assert result.status == "done", result.report
    envelopes = await read_task_events(pipeline.bus, result.task_id)
    calls = _events(envelopes, "tool_call")
    by_role = {(c["role"], c["server"], c["tool"]) for c in calls}
    assert {
        ("retriever", "search", "search_code"),
        ("coder", "fs", "read_file"),
        ("coder", "fs", "write_file"),
        ("coder", "exec", "run_tests"),
    } <= by_role
    assert any(c["role"] == "verifier" and c["server"] == "exec" for c in calls)
    steps = {d["step_id"]: d["role"] for d in _events(envelopes, "transition") if d.get("step_id")}
    for call in calls:
        assert call["outcome"] == "ok" and call["duration_ms"] >= 0, call
        assert steps[call["step_id"]] == call["role"] and call["trace_id"] == result.trace_id
    written = next(c for c in calls if c["tool"] == "write_file")
    fixed = CALC["calc/__init__.py"].replace("a - b", "a + b")
    assert written["arguments"]["content"] == {
        "chars": len(fixed),
        "sha256": hashlib.sha256(fixed.encode()).hexdigest(),
    }
    text = json.dumps(calls)
    assert "return a + b" not in text and "return a - b" not in text
    for call in _events(envelopes, "model_call"):
        assert steps[call["step_id"]] == call["role"] and call["trace_id"] == result.trace_id
    assert max(len(e.to_bytes()) for e in envelopes) < 64 * 1024


async def test_a_refused_protected_write_is_a_refused_tool_call(pipeline, tmp_path: Path) -> None:
    """A high-risk call nobody confirms is refused by the server; its event says `refused` and why."""
    repo = make_repo(tmp_path / "repo", CALC)
    task = TaskSubmitted(
        text="add a CI workflow",
        repo=str(repo),
        mode="write",
        confirm_timeout_s=0.5,
        models=ModelNames(default=model("protected_write")),
    )
    result = await pipeline(task)
    calls = _events(await read_task_events(pipeline.bus, result.task_id), "tool_call")
    writes = [c for c in calls if c["tool"] == "write_file"]
    assert writes and writes[0]["outcome"] == "refused" and writes[0]["error_type"] == "permission_denied"
    assert writes[0]["server"] == "fs" and writes[0]["role"] == "coder"
