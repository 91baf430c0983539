"""Scripted models that misbehave as real (small, local) models do, for `test_model_misbehaviour.py`.

Each function plays the coder (and, where named, the planner) of a task on a tiny repository
with `calc.py`. The misbehaving shapes are those a real model emits: tool-call arguments that are
not JSON, a tool that does not exist, arguments of the wrong type or missing, an empty response,
text where a structured answer was needed (the planner's plan) or where tool calls making a
change were (the coder of a write task), a response cut off at the token limit. `*_then_recover`
variants misbehave once and then read `calc.py` and answer, so a test sees what the model was
told in between; the others never stop misbehaving, so only a limit ends them.

Every function appends what it saw of the loop's answers (retry prompts, tool errors) and the
run's prompt to the file named by the task's `record: PATH` line, as JSON lines.
"""

import json
import re
from pathlib import Path

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)


def _prompt(messages) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def _told(messages) -> list[str]:
    """What the loop said back to the model: retry prompts and tool results, in order."""
    out = []
    for message in messages[1:]:
        for part in getattr(message, "parts", []):
            if isinstance(part, UserPromptPart):
                out.append(f"prompt: {part.content}")
            elif isinstance(part, RetryPromptPart):
                out.append(f"retry: {part.model_response()}")
            elif isinstance(part, ToolReturnPart):
                out.append(f"{part.tool_name} [{part.outcome}]: {str(part.content)[:300]}")
    return out


def _record(messages, info) -> None:
    match = re.search(r"^record: (\S+)$", _prompt(messages), re.M)
    if match:
        entry = {"requests": _requests(messages), "told": _told(messages), "prompt": _prompt(messages)}
        with Path(match.group(1)).open("a") as out:
            out.write(json.dumps(entry) + "\n")


def _requests(messages) -> int:
    """Which request of the run this is (1-based)."""
    return 1 + sum(isinstance(m, ModelResponse) for m in messages)


def _is_planner(info) -> bool:
    return bool(info.output_tools) and not info.function_tools


def _plan(info) -> ModelResponse:
    plan = {
        "steps": [{"description": "fix add in calc.py", "files": ["calc.py"]}],
        "files_of_interest": ["calc.py"],
    }
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)])


def _recover(messages) -> ModelResponse:
    if not any(
        isinstance(p, ToolReturnPart) and p.tool_name == "read_file" and p.outcome == "success"
        for m in messages
        for p in getattr(m, "parts", [])
    ):
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "calc.py"})])
    return ModelResponse(parts=[TextPart("add subtracts; it should add.")])


SHAPES = {
    "malformed": lambda: ToolCallPart("read_file", '{"path": "calc.py"'),
    "unknown_tool": lambda: ToolCallPart("open_file", {"filename": "calc.py"}),
    "wrong_types": lambda: ToolCallPart("read_file", {"path": ["calc.py"], "start_line": "one"}),
    "missing_args": lambda: ToolCallPart("read_file", {}),
}


def _shape(name: str, *, times: int | None):
    def model(messages, info) -> ModelResponse:
        if _is_planner(info):
            return _plan(info)
        _record(messages, info)
        if times is None or _requests(messages) <= times:
            return ModelResponse(parts=[SHAPES[name]()])
        return _recover(messages)

    model.__name__ = name
    return model


malformed_then_recover = _shape("malformed", times=1)
unknown_tool_then_recover = _shape("unknown_tool", times=1)
wrong_types_then_recover = _shape("wrong_types", times=1)
missing_args_then_recover = _shape("missing_args", times=1)
malformed_forever = _shape("malformed", times=None)
unknown_tool_forever = _shape("unknown_tool", times=None)
wrong_types_forever = _shape("wrong_types", times=None)


def empty_then_recover(messages, info) -> ModelResponse:
    if _is_planner(info):
        return _plan(info)
    _record(messages, info)
    if _requests(messages) == 1:
        return ModelResponse(parts=[])
    return _recover(messages)


def empty_forever(messages, info) -> ModelResponse:
    if _is_planner(info):
        return _plan(info)
    _record(messages, info)
    return ModelResponse(parts=[])


def planner_talks(messages, info) -> ModelResponse:
    """As the planner: prose where the plan (a structured answer) was asked for, every time."""
    if _is_planner(info):
        _record(messages, info)
        return ModelResponse(parts=[TextPart("To fix this bug I would look at calc.py and change add.")])
    return _recover(messages)


def coder_talks(messages, info) -> ModelResponse:
    """As the coder of a write task: prose about the fix where tool calls making it were needed,
    every time (a small model's most common answer: it describes the change and stops)."""
    if _is_planner(info):
        return _plan(info)
    _record(messages, info)
    return ModelResponse(parts=[TextPart("The bug is in calc.py: add should return a + b. I have fixed it.")])


def cut_off_tool_call(messages, info) -> ModelResponse:
    """A response that ran into the token limit in the middle of a tool call's arguments."""
    if _is_planner(info):
        return _plan(info)
    _record(messages, info)
    return ModelResponse(
        parts=[
            ToolCallPart(
                "write_file",
                '{"path": "calc.py", "content": "def add(a, b):\\n    return a + b\\n\\n\\n' + "#" * 400,
            )
        ],
        finish_reason="length",
    )


def rambles(messages, info) -> ModelResponse:
    """Text that never stops (cut at the token limit), every time."""
    if _is_planner(info):
        return _plan(info)
    _record(messages, info)
    return ModelResponse(parts=[TextPart("I will now fix it. " * 200)], finish_reason="length")
