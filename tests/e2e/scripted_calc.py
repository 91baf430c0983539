"""Scripted decisions for the verdict-by-execution tasks (`function:tests/e2e/scripted_calc.py:NAME`):
a planner that names no test target and no test file, and coders of `calc/ops.py`'s `mean`, which
divides by one less than the count. With RECORD_ENV set, each coder prompt is appended to that file."""

import os
import re
from pathlib import Path

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

RECORD_ENV = "CODELOOP_TEST_PROMPTS"
FEEDBACK = "## Your previous attempt failed verification"


def _prompt(messages) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def _returns(messages) -> list[ToolReturnPart]:
    return [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]


def _plan(info) -> ModelResponse:
    plan = {
        "steps": [{"description": "fix the count mean divides by", "files": ["calc/ops.py"]}],
        "files_of_interest": ["calc/ops.py"],
        "test_targets": [],
    }
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)])


def _code(messages, info, divisor_for) -> ModelResponse:
    """Plan, or: read calc/ops.py, rewrite `mean`'s divisor as `divisor_for(feedback)` says, stop."""
    if info.output_tools and not info.function_tools:
        return _plan(info)
    prompt, returns = _prompt(messages), _returns(messages)
    if not returns:
        if os.environ.get(RECORD_ENV):
            with Path(os.environ[RECORD_ENV]).open("a") as out:
                out.write(prompt + "\n\x1e\n")
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "calc/ops.py"})])
    if not any(p.tool_name == "write_file" for p in returns):
        source = next(p.content["content"] for p in returns if p.tool_name == "read_file")  # pyright: ignore[reportIndexIssue, reportCallIssue, reportArgumentType] - read_file returns its JSON object
        feedback = prompt.split(FEEDBACK)[1].split("## Task")[0] if FEEDBACK in prompt else ""
        text = re.sub(r"/ \(len\(xs\)[^)]*\)", f"/ ({divisor_for(feedback)})", source)
        return ModelResponse(parts=[ToolCallPart("write_file", {"path": "calc/ops.py", "content": text})])
    return ModelResponse(parts=[TextPart("changed the divisor of mean")])


def right(messages, info) -> ModelResponse:
    """The correct fix at once: `len(xs)`."""
    return _code(messages, info, lambda fb: "len(xs)")


def always_wrong(messages, info) -> ModelResponse:
    """`len(xs) + 1` on every attempt."""
    return _code(messages, info, lambda fb: "len(xs) + 1")
