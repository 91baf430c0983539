"""Every model call metered and reported: tokens, latency, attempts, and the log line on codeloop.agents."""

import logging
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from agents.errors import ModelMisbehaved
from agents.models.adapter import (
    MeteredModel,
    ModelCall,
    RetryPolicy,
    build_model,
    model_errors_as_agent_errors,
)

pytestmark = pytest.mark.anyio


class Verdict(BaseModel):
    ok: bool


async def test_function_model_run_reports_each_request_with_tokens_and_latency(caplog) -> None:
    """Issue contract: every model call is reported with role, model, tokens in/out and latency."""

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart("lookup", {"key": "a"})],
                usage=RequestUsage(input_tokens=120, output_tokens=9),
            )
        return ModelResponse(
            parts=[TextPart("found " + "x" * 500)], usage=RequestUsage(input_tokens=150, output_tokens=4)
        )

    received: list[ModelCall] = []

    async def on_call(call: ModelCall) -> None:  # async, as a role publishing an event would be
        received.append(call)

    model = MeteredModel(
        FunctionModel(script), name="function:script.py:script", role="planner", on_call=on_call
    )
    agent = Agent(model)
    agent.tool_plain(lambda key: key.upper(), name="lookup")  # pyright: ignore[reportCallIssue] - pydantic-ai's overloads do not cover a lambda; the tool takes one str
    with caplog.at_level(logging.INFO, logger="codeloop.agents"), anyio.fail_after(10):
        result = await agent.run("find a")
    assert result.output.startswith("found ")
    assert [(c.role, c.model, c.outcome, c.input_tokens, c.output_tokens, c.attempts) for c in received] == [
        ("planner", "function:script.py:script", "ok", 120, 9, 1),
        ("planner", "function:script.py:script", "ok", 150, 4, 1),
    ]
    assert all(c.latency_s > 0 and c.cost_usd is None for c in received)
    assert received[0].output_preview == 'lookup({"key":"a"})'
    assert len(received[1].output_preview) < 260  # output is trimmed, never logged in full  # pyright: ignore[reportArgumentType] - a tool call's event carries its output preview
    lines = [r.getMessage() for r in caplog.records if r.name == "codeloop.agents"]
    assert len(lines) == 2 and "in=120 out=9" in lines[0] and "x" * 300 not in lines[1]


async def test_a_hung_attempt_times_out_and_is_retried() -> None:
    """Our design: a timeout is infrastructure; with attempt_timeout_s a stuck request is tried again."""
    entered: list[int] = []

    async def hangs_once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        entered.append(1)
        if len(entered) == 1:
            await anyio.sleep_forever()
        return ModelResponse(parts=[TextPart("second try")])

    calls: list[ModelCall] = []
    retry = RetryPolicy(max_attempts=2, base_delay_s=0, attempt_timeout_s=0.2)
    agent = Agent(
        MeteredModel(
            FunctionModel(hangs_once), name="function:x", role="coder", on_call=calls.append, retry=retry
        )
    )
    with anyio.fail_after(10):
        result = await agent.run("hi")
    assert result.output == "second try"
    assert [(c.outcome, c.attempts) for c in calls] == [("ok", 2)]


async def test_output_that_never_validates_becomes_model_misbehaved() -> None:
    """Our design: unusable output after the agent's retries is the model's fault, class agent.format."""

    def bad_output(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"ok": "not a boolean at all"})])

    agent = Agent(
        MeteredModel(FunctionModel(bad_output), name="function:bad", role="planner"),
        output_type=Verdict,
        retries=1,
    )
    with (
        anyio.fail_after(10),
        pytest.raises(ModelMisbehaved) as raised,
        model_errors_as_agent_errors(model="function:bad"),
    ):
        await agent.run("judge")
    assert raised.value.failure_class == "agent.format"


async def test_streamed_requests_are_metered_too(tmp_path: Path) -> None:
    """Our design: a streamed request (run_stream, event handlers) goes through the same meter."""
    script = tmp_path / "streaming.py"
    script.write_text(
        "async def talk(messages, info):\n"
        "    for piece in ('stream', 'ed ', 'answer'):\n"
        "        yield piece\n"
    )
    calls: list[ModelCall] = []
    agent = Agent(build_model(f"function:{script}:talk", role="coder", on_call=calls.append))
    with anyio.fail_after(10):
        async with agent.run_stream("hi") as run:
            output = await run.get_output()
    assert output == "streamed answer"
    assert [(c.outcome, c.attempts, c.output_preview) for c in calls] == [("ok", 1, "streamed answer")]
    assert calls[0].output_tokens > 0
