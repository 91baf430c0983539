"""Scripted models for the tasks-server tests (loaded as `function:tests/e2e/tasks_scripted.py:NAME`)."""

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from tests.e2e.scripted import _is_planner, _plan, _returns


def env_write(messages, info) -> ModelResponse:
    """Writes `.env` (a protected path: the fs server asks a person first), then says what the write returned."""
    if _is_planner(info):
        return _plan(messages, info)
    returns = _returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart("write_file", {"path": ".env", "content": "DEBUG=1\n"})])
    return ModelResponse(parts=[TextPart(f"write returned: {str(returns[-1].content)[:200]}")])
