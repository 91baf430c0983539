"""Spans of a model run and of a message's handling: names, parents, and content kept out."""

import json
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from agents.runtime.role import RunInfo
from agents.runtime.tracing import instrumentation_observer
from bus.tracing import incoming_context, task_context, trace_headers
from codeloop.wiring.telemetry import JsonLinesSpanExporter

pytestmark = pytest.mark.anyio
PROMPT = "prompt-canary-91ab"
ARGUMENT = "argument-canary-77cd"
OUTPUT = "output-canary-05ef"


def _decide(messages, info) -> ModelResponse:
    if not any(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", [])):
        return ModelResponse(parts=[ToolCallPart("lookup", {"query": ARGUMENT})])
    return ModelResponse(parts=[TextPart(OUTPUT)])


async def _run_spans(*, include_content: bool) -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = instrumentation_observer(include_content=include_content, tracer_provider=provider)
    agent = Agent(
        FunctionModel(_decide), name="coder", capabilities=[observer(RunInfo("t1", "coder", "03-code"))]
    )

    @agent.tool_plain
    def lookup(query: str) -> str:
        return f"found {query}"

    result = await agent.run(f"fix it ({PROMPT})")
    assert result.output == OUTPUT
    return list(exporter.get_finished_spans())


def _everything(spans: list) -> str:
    return json.dumps([json.loads(s.to_json()) for s in spans])


async def test_a_model_run_has_agent_chat_and_tool_spans_without_content_by_default() -> None:
    """Traces follow the GenAI conventions and keep prompts, tool arguments and output out."""
    spans = await _run_spans(include_content=False)
    names = [s.name for s in spans]
    assert "invoke_agent coder" in names and "execute_tool lookup" in names
    chat = next(s for s in spans if s.name.startswith("chat "))
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    tool = next(s for s in spans if s.name == "execute_tool lookup")
    assert tool.attributes["gen_ai.tool.name"] == "lookup"
    text = _everything(spans)
    for content in (PROMPT, ARGUMENT, OUTPUT):
        assert content not in text


async def test_content_reaches_spans_only_when_switched_on() -> None:
    """The opt-in (`CODELOOP_TRACE_CONTENT=1`) puts the prompt and tool arguments into spans."""
    text = _everything(await _run_spans(include_content=True))
    assert PROMPT in text and ARGUMENT in text and OUTPUT in text


def test_a_message_of_the_tasks_trace_keeps_its_parent_and_any_other_gets_the_task_context() -> None:
    """The envelope's trace id is the OpenTelemetry trace id: a carried context of another trace
    (or none) is replaced by the task context, which every process derives alike."""
    trace_id = "a592e3578bd44f04a6f96a8183a6b39e"
    task = trace.get_current_span(task_context(trace_id)).get_span_context()
    assert task.trace_id == int(trace_id, 16) and task.is_remote
    assert trace.get_current_span(task_context(trace_id)).get_span_context() == task

    ours = trace.SpanContext(int(trace_id, 16), 0x1234, is_remote=False, trace_flags=trace.TraceFlags(1))
    with trace.use_span(trace.NonRecordingSpan(ours)):
        headers = trace_headers()
    assert headers["traceparent"] == f"00-{trace_id}-0000000000001234-01"
    assert trace.get_current_span(incoming_context(headers, trace_id)).get_span_context().span_id == 0x1234

    other = "0" * 31 + "1"
    foreign = {"traceparent": f"00-{other}-0000000000001234-01"}
    for carried in (foreign, {}, None):
        assert trace.get_current_span(incoming_context(carried, trace_id)).get_span_context() == task
    assert task_context("not-a-trace-id") is None


def test_spans_of_several_exporters_land_in_one_file_as_whole_lines(tmp_path: Path) -> None:
    """Each process appends its spans to the trace file; lines from different writers stay whole."""
    path = tmp_path / "spans.jsonl"
    for process in ("a", "b"):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
        tracer = provider.get_tracer("test")
        for i in range(3):
            with tracer.start_as_current_span(f"{process}-{i}"):
                pass
    names = [json.loads(line)["name"] for line in path.read_text().splitlines()]
    assert sorted(names) == ["a-0", "a-1", "a-2", "b-0", "b-1", "b-2"]
