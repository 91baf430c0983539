"""Scripted decisions for the project-instructions and user-MCP-server tests
(`function:tests/e2e/scripted_agentsmcp.py:NAME`).

A task text line `record: PATH` makes each function append `{"role", "prompt", "tools"}` per model
request to PATH, so a test can assert on what each role was shown and offered.
"""

import json
import os
import re
import signal
from pathlib import Path

from pydantic_ai.messages import ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart

from tests.e2e.scripted import _content, _is_planner, _plan, _prompt, _returns

MARKERS = ("ROOT-MARKER-7f3a", "CALC-MARKER-19c2")
"""Written in the root `AGENTS.md` and in `calc/AGENTS.md` by the instructions tests."""
PLANTED = "sk_live_" + "77aa66bb55cc44dd33ee22ff11aa00bb"


def _called(messages) -> list[str]:
    """The tools the model asked for so far, in order (answered or not)."""
    return [
        p.tool_name
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    ]


def _seen(messages) -> list[str]:
    """What the tools answered so far: returns and errors, as text."""
    parts = [p for m in messages for p in getattr(m, "parts", [])]
    return [f"{p.tool_name}: {p.content}" for p in parts if isinstance(p, ToolReturnPart | RetryPromptPart)]


def instructions_section(prompt: str) -> str:
    """The prompt's `## Project instructions` section (its `###` files included); empty without one.
    Only there do markers count: a search may show an `AGENTS.md` among the relevant files too."""
    _, found, rest = prompt.partition("## Project instructions\n")
    return re.split(r"^## ", rest, flags=re.M)[0] if found else ""


def _record(messages, info, role: str) -> None:
    match = re.search(r"^record: (\S+)$", _prompt(messages), re.M)
    if match:
        entry = {
            "role": role,
            "prompt": _prompt(messages),
            "tools": sorted(t.name for t in info.function_tools),
            "seen": _seen(messages),
        }
        with Path(match.group(1)).open("a") as out:
            out.write(json.dumps(entry) + "\n")


def _fix_add(returns) -> ModelResponse:
    """Read calc/__init__.py, write `a + b` for `a - b`, then finish."""
    read = [_content(p) for p in returns if p.tool_name == "read_file"]
    if not read:
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "calc/__init__.py"})])
    if not any(p.tool_name == "write_file" for p in returns):
        fixed = read[0]["content"].replace("a - b", "a + b")
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": "calc/__init__.py", "content": fixed})]
        )
    return ModelResponse(parts=[TextPart("add adds now")])


def fix_if_instructed(messages, info) -> ModelResponse:
    """Fixes `add` only when both instruction markers are in its prompt; says which are missing
    otherwise (and changes nothing)."""
    role = "planner" if _is_planner(info) else "coder"
    _record(messages, info, role)
    if role == "planner":
        return _plan(messages, info)
    returns, given = _returns(messages), instructions_section(_prompt(messages))
    missing = [m for m in MARKERS if m not in given]
    if missing and not returns:
        return ModelResponse(parts=[TextPart(f"instructions missing: {', '.join(missing)}")])
    return _fix_add(returns)


def _kill_server(marker: str) -> int:
    """Kill this process's child whose command line holds `marker` (a user's MCP server); its pid."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if marker in cmdline and parent == os.getpid():
            os.kill(int(entry.name), signal.SIGKILL)
            return int(entry.name)
    raise AssertionError(f"no child process mentions {marker}")


def use_user_servers(messages, info) -> ModelResponse:
    """Calls a tool of each user server (`memory`, `everything`), echoes a planted key, kills the
    memory server (a harness move: a real server dying mid-task) and calls it again, then fixes
    `add`. What each call returned is recorded."""
    if _is_planner(info):
        return _plan(messages, info)
    _record(messages, info, "coder")
    returns, called = _returns(messages), _called(messages)
    if "memory__create_entities" not in called:
        entity = {"name": "calc", "entityType": "module", "observations": ["add subtracts"]}
        return ModelResponse(parts=[ToolCallPart("memory__create_entities", {"entities": [entity]})])
    if "everything__echo" not in called:
        return ModelResponse(parts=[ToolCallPart("everything__echo", {"message": f"key={PLANTED}"})])
    if "memory__read_graph" not in called:
        _kill_server("mcp-server-memory")
        return ModelResponse(parts=[ToolCallPart("memory__read_graph", {})])
    return _fix_add([p for p in returns if not p.tool_name.startswith(("memory__", "everything__"))])


def fix_with_ci_workflow_recorded(messages, info) -> ModelResponse:
    """`scripted.fix_with_ci_workflow` (a CI workflow, a protected path, then the fix), recorded."""
    from tests.e2e.scripted import fix_with_ci_workflow

    _record(messages, info, "planner" if _is_planner(info) else "coder")
    return fix_with_ci_workflow(messages, info)
