"""A scripted model for the continuation tests (`function:tests/e2e/scripted_continue.py:stepwise`).

It fixes `calc/__init__.py` one bug per request and decides each step from what the workspace
shows now, not from a conversation it remembers: a continued task's coder starts a new
conversation in a workspace holding the parent's patch, so only a workspace that really starts
there lets it finish. One request each: read the module, fix `add`, read again, fix `mul`, read
again, answer. With "empty list" in its prompt it also guards `mean` in `calc/stats.py`.
A task text line `record: PATH` appends each prompt it gets (role, prompt) to PATH as JSON lines.
"""

import json
import re
from pathlib import Path

import anyio
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

MODULE = "calc/__init__.py"
STATS = "calc/stats.py"
BUGS = (("return a - b\n\n\ndef mul", "return a + b\n\n\ndef mul"), ("return a ** b", "return a * b"))
GUARD = "    if not values:\n        return 0\n"


def _prompt(messages) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def _record(messages, role: str) -> None:
    prompt = _prompt(messages)
    match = re.search(r"^record: (\S+)$", prompt, re.M)
    if match and len(messages) == 1:  # once per run: its first request
        with Path(match.group(1)).open("a") as out:
            out.write(json.dumps({"role": role, "prompt": prompt}) + "\n")


def _plan(messages, info) -> ModelResponse:
    _record(messages, "planner")
    plan = {
        "steps": [{"description": "fix add, then mul, in calc/__init__.py", "files": [MODULE]}],
        "files_of_interest": [MODULE],
        "test_targets": ["tests/test_calc.py"],
    }
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)])


def _read(path: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("read_file", {"path": path})])


def _write(path: str, content: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("write_file", {"path": path, "content": content})])


def stepwise(messages, info) -> ModelResponse:
    if info.output_tools and not info.function_tools:
        return _plan(messages, info)
    _record(messages, "coder")
    returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    last = returns[-1] if returns else None
    if last is None or last.tool_name != "read_file":
        return _read(MODULE)
    body = last.content if isinstance(last.content, dict) else {}
    path, text = body.get("path"), body.get("content", "")
    if path == MODULE:
        for wrong, right in BUGS:
            if wrong in text:
                return _write(MODULE, text.replace(wrong, right))
        if "empty list" in _prompt(messages):
            return _read(STATS)
    if path == STATS and GUARD not in text:
        return _write(STATS, text.replace("    total = 0\n", GUARD + "    total = 0\n"))
    return ModelResponse(parts=[TextPart("add and mul fixed in calc/__init__.py")])


async def wait_for_go(messages, info) -> ModelResponse:
    """The coder waits (up to two minutes, without blocking the event loop the roles share) until
    the file a task text line `go: PATH` names exists, then answers: a task that stays `coding` as
    long as a test needs it running."""
    if info.output_tools and not info.function_tools:
        return _plan(messages, info)
    go = Path(re.search(r"^go: (\S+)$", _prompt(messages), re.M).group(1))  # pyright: ignore[reportOptionalMemberAccess] - the test's task text always holds its go line
    with anyio.move_on_after(120):
        while not await anyio.Path(go).exists():  # noqa: ASYNC110 - the test creates it
            await anyio.sleep(0.1)
    return ModelResponse(parts=[TextPart("waited")])
