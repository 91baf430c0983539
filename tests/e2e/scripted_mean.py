"""Scripted decisions for the verdict tests (`function:tests/e2e/scripted_mean.py:NAME`): a
planner that names no test target, and coders of `stats/ops.py`'s `mean`, which divides by one
less than the count. A task text line `record: PATH` appends each coder prompt to PATH."""

import re
from pathlib import Path

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.usage import RequestUsage

from tests.e2e.scripted import _prompt, _returns

FEEDBACK = "## Your previous attempt failed verification"


def _plan(info) -> ModelResponse:
    plan = {
        "steps": [{"description": "fix the count mean divides by", "files": ["stats/ops.py"]}],
        "files_of_interest": ["stats/ops.py"],
        "test_targets": [],
    }
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)])


def _code(messages, divisor_for) -> ModelResponse:
    """Read stats/ops.py, rewrite `mean`'s divisor as `divisor_for(feedback)` says, and stop."""
    prompt, returns = _prompt(messages), _returns(messages)
    if not returns:
        match = re.search(r"^record: (\S+)$", prompt, re.M)
        if match:
            with Path(match.group(1)).open("a") as out:
                out.write(prompt + "\n\x1e\n")
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "stats/ops.py"})])
    if not any(p.tool_name == "write_file" for p in returns):
        source = next(p.content["content"] for p in returns if p.tool_name == "read_file")  # pyright: ignore[reportArgumentType, reportCallIssue, reportIndexIssue] - read_file returns its structured content as a dict
        feedback = prompt.split(FEEDBACK)[1].split("## Task")[0] if FEEDBACK in prompt else ""
        text = re.sub(r"/ \(len\(xs\)[^)]*\)", f"/ ({divisor_for(feedback)})", source)
        return ModelResponse(parts=[ToolCallPart("write_file", {"path": "stats/ops.py", "content": text})])
    return ModelResponse(parts=[TextPart("changed the divisor of mean")])


def fix_on_feedback(messages, info) -> ModelResponse:
    """First `len(xs) + 1` (still wrong); the right divisor only once the verifier's feedback names
    the failing test with its assertion message."""
    if info.output_tools and not info.function_tools:
        return _plan(info)
    named = lambda fb: "tests/test_ops.py::test_mean" in fb and "mean of 1, 2, 3" in fb  # noqa: E731
    return _code(messages, lambda fb: "len(xs)" if named(fb) else "len(xs) + 1")


def never_fixed(messages, info) -> ModelResponse:
    """A different wrong divisor on every attempt."""
    if info.output_tools and not info.function_tools:
        return _plan(info)
    return _code(messages, lambda fb: "len(xs) + 2" if fb else "len(xs) + 1")


def priced_busy(messages, info) -> ModelResponse:
    """Plans, then lists files with a new limit every call, never ending; each response reports
    1000 input and 500 output tokens, priced as gpt-4o's ($0.0075 a call)."""
    usage = RequestUsage(input_tokens=1000, output_tokens=500)
    if info.output_tools and not info.function_tools:
        response = _plan(info)
    else:
        n = len(_returns(messages))
        response = ModelResponse(parts=[ToolCallPart("list_files", {"path": ".", "limit": 100 + n})])
    response.usage = usage
    return response


priced_busy.priced_as = "gpt-4o"
