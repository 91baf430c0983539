"""One task, one trace: spans of the orchestrator, two worker processes and a stdio MCP server
process joined by the context NATS headers and MCP `_meta` carry; no content in them by default,
and no secret in them, in the logs, the events, the audit records or the result.

Every process appends its spans to one JSON-lines file (`CODELOOP_TRACE_FILE`), which is how the
test sees what each process exported. The task runs once for the module; each test reads it.
"""

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskResult, TaskSubmitted
from agents.workspace import capture_snapshot
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.cli.trace import read_task_events
from codeloop.testing import make_repo
from tests.e2e.conftest import model
from tests.processes import stop_process
from tests.redaction import secrets_corpus as planted
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
PROMPT_CANARY = "prompt-canary-4f1d9c"
MODEL_OUTPUT = "add subtracted instead of adding"
TOOL_ARGUMENT = "return a + b"


ENVIRONMENT = {
    "OPENAI_API_KEY": planted.OPENAI,
    "GITHUB_TOKEN": planted.GITHUB_CLASSIC,
    "AWS_SECRET_ACCESS_KEY": planted.AWS_SECRET,
}
"""Planted in every process's environment."""


@asynccontextmanager
async def _serve(args: list[str], env: dict, log: Path) -> AsyncIterator[dict]:
    """`codeloop serve ARGS --json` until the block ends (then Ctrl-C and reap); yields its note.
    Its log (stderr) goes to `log`."""
    command = [sys.executable, "-m", "codeloop", "serve", "--no-mcp", "--json", *args]
    process = await anyio.open_process(command, env=env, stderr=log.open("ab"))
    try:
        assert process.stdout is not None
        out = b""
        with anyio.fail_after(120):
            while b"\n" not in out:
                out += await process.stdout.receive()
        yield json.loads(out.split(b"\n")[0])
    finally:
        await stop_process(process, signal.SIGINT, grace_s=30)


@dataclass(frozen=True)
class TracedRun:
    """What the task left: its result, every span, its events, and every file its processes wrote."""

    result: TaskResult
    spans: list[dict]
    events: list[dict]
    base: Path


_RUN: list[TracedRun] = []


async def _traced_run(tmp_path_factory: pytest.TempPathFactory) -> TracedRun:
    if not _RUN:
        _RUN.append(await _run_traced_task(tmp_path_factory.mktemp("traced")))
    return _RUN[0]


async def _run_traced_task(tmp_path: Path) -> TracedRun:
    repo = make_repo(tmp_path / "repo", CALC)
    (repo / ".env").write_text(f"DATABASE_URL=postgres://app:{planted.PASSWORD}@db/app\n")
    spans_file = tmp_path / "spans.jsonl"
    env = {
        **os.environ,
        **ENVIRONMENT,
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "CODELOOP_TRACE_FILE": str(spans_file),
    }
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    env.pop("CODELOOP_TRACE_CONTENT", None)
    logs = tmp_path / "logs"
    logs.mkdir()
    here = ["--role", "orchestrator", "--role", "retriever", "--role", "verifier"]
    async with _serve([*here, "--state-dir", str(tmp_path / "orch")], env, logs / "orch.log") as note:
        nats = ["--nats", note["nats_url"]]
        creds = json.loads(await anyio.Path(note["credentials_file"]).read_text())  # the embedded server's
        env = {**env, "CODELOOP_NATS_USER": creds["user"], "CODELOOP_NATS_PASSWORD": creds["password"]}
        async with (
            _serve(
                [*nats, "--role", "planner", "--state-dir", str(tmp_path / "planner")],
                env,
                logs / "planner.log",
            ),
            _serve(
                [*nats, "--role", "coder", "--tools-stdio", "fs", "--state-dir", str(tmp_path / "coder")],
                env,
                logs / "coder.log",
            ),
        ):
            client = BusConfig(
                state_dir=tmp_path / "client",
                servers=(note["nats_url"],),
                user=creds["user"],
                password=creds["password"],
            )
            async with open_bus(client) as bus:
                task = TaskSubmitted(
                    text=f"add(2, 3) returns -1 ({PROMPT_CANARY})",
                    repo=str(repo),
                    mode="write",
                    models=ModelNames(default=model("fix_quoting_secrets")),
                    snapshot=await capture_snapshot(bus, repo),
                )
                envelope, _ = await submit_task(bus, task)
                with anyio.fail_after(240):
                    final = await watch_task(bus, envelope.task_id, lambda e: None)
                events = [e.model_dump(mode="json") for e in await read_task_events(bus, envelope.task_id)]
    # Every process has stopped: each span was written as it ended.
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    return TracedRun(TaskResult.model_validate(final.payload), spans, events, tmp_path)


def _process_of(span: dict) -> str:
    return span["resource"]["attributes"]["service.instance.id"]


def _part_of(span: dict) -> str:
    return span["resource"]["attributes"]["codeloop.process"]


async def test_one_task_is_one_trace_across_orchestrator_workers_and_a_stdio_tool_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The trace context crosses NATS in headers and MCP in `_meta`: every span of the task, in
    four processes, has the task's trace id and hangs in one tree under the task's context."""
    run = await _traced_run(tmp_path_factory)
    result, spans = run.result, run.spans
    assert result.status == "done", result.report

    assert {s["context"]["trace_id"] for s in spans} == {"0x" + result.trace_id}  # pyright: ignore[reportOperatorIssue] - a traced task's result carries its trace id
    by_id = {s["context"]["span_id"]: s for s in spans}
    # One tree: the only parent not among the spans is the task context every process derives.
    assert len({s["parent_id"] for s in spans if s["parent_id"] not in by_id}) == 1

    names_by_part: dict[str, set[str]] = {}
    for span in spans:
        names_by_part.setdefault(_part_of(span), set()).add(span["name"])
    serve_processes = {_process_of(s) for s in spans if _part_of(s) == "serve"}
    assert len(serve_processes) == 3  # orchestrator (+ retriever, verifier), planner, coder
    assert {
        "invoke_workflow codeloop",
        "invoke_agent retriever",
        "invoke_agent verifier",
        "invoke_agent planner",
        "invoke_agent coder",
        "execute_tool read_file",
        "execute_tool write_file",
    } <= names_by_part["serve"]
    assert any(name.startswith("chat ") for name in names_by_part["serve"])
    assert {"tools/call read_file", "tools/call write_file"} <= names_by_part["mcp fs"]

    # The stdio server's span is a child of the coder's tool call, in another process.
    served = next(s for s in spans if s["name"] == "tools/call write_file" and _part_of(s) == "mcp fs")
    ancestor = by_id[served["parent_id"]]
    while not ancestor["name"].startswith("execute_tool"):
        ancestor = by_id[ancestor["parent_id"]]
    assert ancestor["name"] == "execute_tool write_file"
    assert _process_of(ancestor) != _process_of(served)
    coder_run = next(s for s in spans if s["name"] == "invoke_agent coder")
    assert coder_run["attributes"]["gen_ai.agent.name"] == "coder"
    chat = next(
        s for s in spans if s["name"].startswith("chat ") and _process_of(s) == _process_of(coder_run)
    )
    assert chat["attributes"]["gen_ai.operation.name"] == "chat"
    assert chat["attributes"]["gen_ai.request.model"]
    assert "gen_ai.usage.input_tokens" in chat["attributes"]
    # The coder's run is a child of the worker's handling of the message the orchestrator's
    # handling of the retriever's result dispatched (published by the runtime, after the workflow span).
    handling = by_id[coder_run["parent_id"]]
    assert handling["name"] == "process codeloop.work.coder"
    dispatch = by_id[handling["parent_id"]]
    assert dispatch["name"] == "process codeloop.task.result.retriever"
    assert any(
        s["name"] == "invoke_workflow codeloop" and s["parent_id"] == dispatch["context"]["span_id"]
        for s in spans
    )
    assert _process_of(dispatch) != _process_of(handling)

    # Default: no prompt text, model output or tool argument in any span (attributes, events).
    text = json.dumps(spans)
    for content in (PROMPT_CANARY, MODEL_OUTPUT, TOOL_ARGUMENT):
        assert content not in text


def _is_work(parts: tuple[str, ...]) -> bool:
    """The repository itself, and each process's JetStream store."""
    return parts[0] == "repo" or parts[1:2] == ("nats",)


async def test_a_secret_planted_anywhere_reaches_no_span_log_event_audit_record_or_result(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Secrets in every process's environment, in the repository's `.env`, in a tool argument and
    in the model's responses (its plan and its answer): none is in a span, a log line, an event, an
    audit record or the result. The JetStream stores are left out of the grep: they carry the
    work itself (the submitted tree, the plan handed to the next role), which is not a record of it."""
    run = await _traced_run(tmp_path_factory)
    assert run.result.status == "done", run.result.report
    secrets = [
        planted.OPENAI,
        planted.GITHUB_CLASSIC,
        planted.AWS_SECRET,
        planted.PASSWORD,
        planted.SLACK,
        planted.OPENAI_PROJECT,
        planted.ANTHROPIC,
    ]
    written = {
        str(path.relative_to(run.base)): path.read_bytes()
        for path in run.base.rglob("*")
        if path.is_file() and not _is_work(path.relative_to(run.base).parts)
    }
    assert all(name in written for name in ("spans.jsonl", "logs/orch.log", "logs/coder.log"))
    assert b'"list_files"' in written["coder/mcp-audit-stdio.jsonl"]  # the coder's tool server audits
    leaks = {name: [s for s in secrets if s.encode() in data] for name, data in written.items()}
    assert {name: found for name, found in leaks.items() if found} == {}
    seen = json.dumps(run.events) + run.result.model_dump_json()
    assert [s for s in secrets if s in seen] == []
    # The grep could see: the model's words are there, its secrets masked; the tool call is an event.
    assert "[redacted]" in run.result.answer and "add subtracted instead of adding" in run.result.answer  # pyright: ignore[reportOperatorIssue] - the result of an answered task has its answer
    assert "[redacted]" in json.dumps(run.result.plan)
    assert any(
        e["payload"].get("name") == "tool_call" and e["payload"]["data"]["tool"] == "list_files"
        for e in run.events
    )
