"""Scripted model decisions for the end-to-end tests (loaded as `function:tests/e2e/scripted.py:NAME`).

Each function plays both LLM roles: as the planner (an output tool and no function tools) it
returns a plan naming the files the search found; as the coder it decides from what the tools
returned. A task text line `record: PATH` makes a function append what it was offered (tool
names) and what it saw to PATH as JSON lines, so a test can assert on the model's view.
"""

import json
import re
import time
from pathlib import Path

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
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


def _returns(messages) -> list[ToolReturnPart]:
    return [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]


def _record(messages, info, **seen) -> None:
    match = re.search(r"^record: (\S+)$", _prompt(messages), re.M)
    if match:
        entry = {"tools": sorted(t.name for t in info.function_tools), "prompt": _prompt(messages), **seen}
        with Path(match.group(1)).open("a") as out:
            out.write(json.dumps(entry) + "\n")


def _plan(messages, info) -> ModelResponse:
    prompt = _prompt(messages)
    found = re.findall(r"^- (\S+\.py)$", prompt.split("## Files a search for the task found")[-1], re.M)
    tests = [f for f in found if f.startswith("tests/")]
    plan = {
        "steps": [
            {"description": "find where the wrong value comes from", "files": found[:3]},
            {"description": "fix it and run the tests"},
        ],
        "hypotheses": ["the arithmetic in calc is wrong"],
        "files_of_interest": [f for f in found if not f.startswith("tests/")][:3],
        "test_targets": tests[:2],
    }
    if "## Why it failed" in prompt:
        plan["revision_reason"] = "the previous fix did not make the tests pass"
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)])


def _is_planner(info) -> bool:
    return bool(info.output_tools) and not info.function_tools


def _content(part: ToolReturnPart) -> dict:
    return part.content if isinstance(part.content, dict) else {}


def fix(messages, info) -> ModelResponse:
    """Reads the files the context lists, rewrites the one with `a - b`, runs the tests when it can."""
    if _is_planner(info):
        return _plan(messages, info)
    _record(messages, info, step=len(_returns(messages)))
    returns = _returns(messages)
    prompt = _prompt(messages)
    listed = re.findall(r"^- (\S+\.py)$", prompt.split("## Relevant files")[-1].split("###")[0], re.M)
    read = {_content(p).get("path") for p in returns if p.tool_name == "read_file"}
    for path in listed:
        if path not in read and not path.startswith("tests/"):
            return ModelResponse(parts=[ToolCallPart("read_file", {"path": path})])
    wrote = [p for p in returns if p.tool_name == "write_file"]
    if not wrote:
        for part in returns:
            body = _content(part)
            if part.tool_name == "read_file" and "a - b" in body.get("content", ""):
                fixed = body["content"].replace("a - b", "a + b")
                return ModelResponse(
                    parts=[ToolCallPart("write_file", {"path": body["path"], "content": fixed})]
                )
        return ModelResponse(parts=[TextPart("found nothing to fix")])
    tools = {t.name for t in info.function_tools}
    if "run_tests" in tools and not any(p.tool_name == "run_tests" for p in returns):
        return ModelResponse(parts=[ToolCallPart("run_tests", {})])
    return ModelResponse(parts=[TextPart("add subtracted instead of adding; fixed in calc/__init__.py")])


def wrong_then_right(messages, info) -> ModelResponse:
    """First attempt writes `a * b` (still wrong); on revision reads the feedback and writes `a + b`."""
    if _is_planner(info):
        return _plan(messages, info)
    _record(messages, info)
    returns = _returns(messages)
    revising = "## Your previous attempt failed verification" in _prompt(messages)
    if not any(p.tool_name == "read_file" for p in returns):
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "calc/__init__.py"})])
    if not any(p.tool_name == "write_file" for p in returns):
        body = next(_content(p) for p in returns if p.tool_name == "read_file")
        text = body["content"]
        text = re.sub(
            r"return a [-*] b\n\n\ndef mul",
            "return a + b\n\n\ndef mul" if revising else "return a * b\n\n\ndef mul",
            text,
        )
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": "calc/__init__.py", "content": text})]
        )
    return ModelResponse(parts=[TextPart("changed add")])


def explain(messages, info) -> ModelResponse:
    """Read mode: reads the module that defines `add` and answers citing the line it saw."""
    if _is_planner(info):
        return _plan(messages, info)
    _record(messages, info)
    returns = _returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart("find_symbol", {"name": "add"})])
    last = returns[-1]
    if last.tool_name == "find_symbol":
        where = _content(last).get("definitions", [{}])[0]
        return ModelResponse(
            parts=[ToolCallPart("read_file", {"path": where.get("path", "calc/__init__.py")})]
        )
    body = _content(last)
    lines = body.get("content", "").splitlines()
    line = next((i for i, text in enumerate(lines, 1) if "a - b" in text), 1)
    return ModelResponse(
        parts=[TextPart(f"`add` in {body.get('path')}:{line} returns `a - b`, so it subtracts.")]
    )


def same_call_forever(messages, info) -> ModelResponse:
    """Calls the same tool with the same arguments every time: a loop."""
    if _is_planner(info):
        return _plan(messages, info)
    return ModelResponse(parts=[ToolCallPart("list_files", {"path": "."})])


def busy_forever(messages, info) -> ModelResponse:
    """Calls a different listing every time: never repeats, never ends."""
    if _is_planner(info):
        return _plan(messages, info)
    n = len(_returns(messages))
    return ModelResponse(parts=[ToolCallPart("list_files", {"path": ".", "limit": 100 + n})])


def slow_forever(messages, info) -> ModelResponse:
    """Thinks for a second before each varied call: only the deadline stops it."""
    if not _is_planner(info):
        time.sleep(1.0)
    return busy_forever(messages, info)


def protected_write(messages, info) -> ModelResponse:
    """Writes a CI workflow (a protected path: the fs server asks a person first), then reports what
    the write returned."""
    if _is_planner(info):
        return _plan(messages, info)
    returns = _returns(messages)
    if not returns:
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": ".github/workflows/ci.yml", "content": "on: push\n"})]
        )
    _record(messages, info, outcome=str(returns[-1].content)[:300])
    return ModelResponse(parts=[TextPart(f"write returned: {str(returns[-1].content)[:200]}")])


def hang_once(messages, info) -> ModelResponse:
    """Like `fix`, except that the first coder call ever (no marker file yet) writes the marker
    with its pid and hangs: its worker is killed meanwhile. Task line: `marker: PATH`."""
    if not _is_planner(info):
        import os

        marker = Path(re.search(r"^marker: (\S+)$", _prompt(messages), re.M).group(1))  # pyright: ignore[reportOptionalMemberAccess] - the test's prompt always holds its marker line
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            time.sleep(3600)
    return fix(messages, info)


def failing_tools(messages, info) -> ModelResponse:
    """Reads files that do not exist, a different one each time: every tool call fails."""
    if _is_planner(info):
        return _plan(messages, info)
    n = len(_returns(messages))
    return ModelResponse(parts=[ToolCallPart("read_file", {"path": f"no/such/file{n}.py"})])


def fix_quoting_secrets(messages, info) -> ModelResponse:
    """`fix`, from a model that quotes secrets: in its plan, in a tool argument and in its answer."""
    from tests.redaction import secrets_corpus as planted

    if _is_planner(info):
        response = _plan(messages, info)
        plan = dict(response.parts[0].args)  # type: ignore[union-attr] - the first part of the scripted response is its tool call
        plan["hypotheses"] = [*plan["hypotheses"], planted.IN_TEXT["openai_project"]]  # pyright: ignore[reportArgumentType] - the plan's arguments are the JSON object the model wrote
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)])  # pyright: ignore[reportArgumentType] - the plan's arguments are the JSON object the model wrote
    returns = _returns(messages)
    if not any(p.tool_name == "list_files" for p in returns):
        return ModelResponse(parts=[ToolCallPart("list_files", {"pattern": f"**/{planted.SLACK}"})])
    response = fix(messages, info)
    part = response.parts[0]
    if isinstance(part, TextPart):
        return ModelResponse(parts=[TextPart(f"{part.content}; {planted.IN_TEXT['anthropic']}")])
    return response


def fix_where_it_raised(messages, info) -> ModelResponse:
    """Starts where the context says the task's example raised: reads that file, guards the line
    that raised against an empty input, runs the tests. Without that section it gives up."""
    if _is_planner(info):
        return _plan(messages, info)
    _record(messages, info)
    returns = _returns(messages)
    section = _prompt(messages).split("## The task's example, run in the sandbox, raised")
    where = (
        re.search(r"^- (\w+) raised at (\S+?):(\d+) in (\w+)", section[-1], re.M)
        if len(section) > 1
        else None
    )
    if where is None:
        return ModelResponse(parts=[TextPart("no reproduction to start from")])
    path, line = where.group(2), int(where.group(3))
    read = [_content(p) for p in returns if p.tool_name == "read_file"]
    if not read:
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": path})])
    if not any(p.tool_name == "write_file" for p in returns):
        lines = read[0]["content"].splitlines(keepends=True)
        indent = lines[line - 1][: len(lines[line - 1]) - len(lines[line - 1].lstrip())]
        lines.insert(line - 1, f"{indent}if not values:\n{indent}    return 0\n")
        return ModelResponse(parts=[ToolCallPart("write_file", {"path": path, "content": "".join(lines)})])
    if not any(p.tool_name == "run_tests" for p in returns):
        return ModelResponse(parts=[ToolCallPart("run_tests", {})])
    return ModelResponse(parts=[TextPart(f"{where.group(1)} in {where.group(4)}: guarded against no values")])


PLANTED_KEY = "sk_live_" + "4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
"""A made-up credential the first attempt of `secret_then_clean` hard-codes (built in two parts
so no secret scanner flags this file)."""


def secret_then_clean(messages, info) -> ModelResponse:
    """Fixes `add`, but the first attempt also hard-codes an API key in calc/__init__.py; when a
    review sends it back (its feedback in the prompt), the revision removes the key."""
    if _is_planner(info):
        return _plan(messages, info)
    returns = _returns(messages)
    sent_back = "requested changes" in _prompt(messages)
    if not any(p.tool_name == "read_file" for p in returns):
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "calc/__init__.py"})])
    if not any(p.tool_name == "write_file" for p in returns):
        text = next(_content(p) for p in returns if p.tool_name == "read_file")["content"]
        lines = [line for line in text.replace("a - b", "a + b").splitlines() if "API_KEY" not in line]
        if not sent_back:
            lines.insert(1, f'API_KEY = "{PLANTED_KEY}"')
        return ModelResponse(
            parts=[
                ToolCallPart("write_file", {"path": "calc/__init__.py", "content": "\n".join(lines) + "\n"})
            ]
        )
    return ModelResponse(parts=[TextPart("removed the hard-coded key" if sent_back else "fixed add")])


def fix_while_the_checkout_changes(messages, info) -> ModelResponse:
    """`fix`, but the first coder decision also appends a line to the file a task text line
    `meanwhile: PATH` names: the user editing the checkout while the task runs."""
    if not _is_planner(info) and not _returns(messages):
        match = re.search(r"^meanwhile: (\S+)$", _prompt(messages), re.M)
        if match:
            with Path(match.group(1)).open("a") as edited:
                edited.write("edited while the task ran\n")
    return fix(messages, info)


CI_WORKFLOW = "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: pytest -q\n"


def fix_with_ci_workflow(messages, info) -> ModelResponse:
    """Adds a CI workflow that runs the tests (a protected path: the fs server asks a person
    first), then fixes `add` (`a - b` to `a + b`) and ends with a summary."""
    if _is_planner(info):
        return _plan(messages, info)
    returns = _returns(messages)
    if not returns:
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": ".github/workflows/ci.yml", "content": CI_WORKFLOW})]
        )
    read = [_content(p) for p in returns if p.tool_name == "read_file"]
    if not read:
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "calc/__init__.py"})])
    if sum(p.tool_name == "write_file" for p in returns) < 2:
        fixed = read[0]["content"].replace("a - b", "a + b")
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": "calc/__init__.py", "content": fixed})]
        )
    return ModelResponse(parts=[TextPart("added a CI workflow running the tests; add adds now")])


def fix_then_wander(messages, info) -> ModelResponse:
    """Fixes `add` (`a - b` to `a + b`), then lists files with new arguments every time and never
    ends: a right patch in a task only the step budget stops."""
    if _is_planner(info):
        return _plan(messages, info)
    returns = _returns(messages)
    read = [_content(p) for p in returns if p.tool_name == "read_file"]
    if not read:
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "calc/__init__.py"})])
    if not any(p.tool_name == "write_file" for p in returns):
        fixed = read[0]["content"].replace("a - b", "a + b")
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": "calc/__init__.py", "content": fixed})]
        )
    return ModelResponse(parts=[ToolCallPart("list_files", {"path": ".", "limit": 100 + len(returns)})])
