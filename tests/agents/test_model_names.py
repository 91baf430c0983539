"""Model names: `function:PATH.py:NAME` files and provider names, as the CLI contract describes them."""

import textwrap
from pathlib import Path

import anyio
import pytest
from pydantic_ai import Agent

from agents.errors import ModelNotConfigured, ModelSpecError
from agents.models.adapter import ModelCall, build_model

pytestmark = pytest.mark.anyio

SCRIPTED = '''
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.usage import RequestUsage

def answer(messages, info):
    """Calls the `double` tool once, then answers with what it returned."""
    returns = [p for m in messages for p in m.parts if getattr(p, "part_kind", "") == "tool-return"]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("double", {"n": 21})], usage=RequestUsage(input_tokens=30, output_tokens=5))
    return ModelResponse(parts=[TextPart(f"sync says {returns[0].content}")], usage=RequestUsage(input_tokens=40, output_tokens=3))

async def answer_async(messages, info):
    return ModelResponse(parts=[TextPart("async says hi")], usage=RequestUsage(input_tokens=8, output_tokens=2))

NOT_CALLABLE = 42

def wrong_arity(messages):
    return None
'''


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "scripted.py"
    path.write_text(textwrap.dedent(SCRIPTED))
    return path


def _agent(name: str, calls: list[ModelCall], **kwargs) -> Agent:
    agent = Agent(build_model(name, role="coder", on_call=calls.append, **kwargs))

    @agent.tool_plain
    def double(n: int) -> int:
        return 2 * n

    return agent


async def test_sync_function_file_drives_a_real_agent_through_a_tool(script: Path) -> None:
    """CLI contract: function:PATH.py:NAME is a FunctionModel callable; sync ones work."""
    calls: list[ModelCall] = []
    with anyio.fail_after(10):
        result = await _agent(f"function:{script}:answer", calls).run("double 21")
    assert result.output == "sync says 42"
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [(30, 5), (40, 3)]


async def test_async_function_file_is_awaited(script: Path) -> None:
    """CLI contract: the callable may be async."""
    calls: list[ModelCall] = []
    with anyio.fail_after(10):
        result = await _agent(f"function:{script}:answer_async", calls).run("hi")
    assert result.output == "async says hi"


async def test_relative_function_path_is_read_from_the_base_directory(script: Path) -> None:
    """Our choice: a relative path is anchored at base_dir (the caller's working directory by default)."""
    calls: list[ModelCall] = []
    with anyio.fail_after(10):
        result = await _agent("function:scripted.py:answer_async", calls, base_dir=script.parent).run("hi")
    assert result.output == "async says hi"


@pytest.mark.parametrize(
    ("suffix", "expected"),
    [
        ("missing.py:answer", "no such file"),
        ("scripted.py:absent", "defines no 'absent'"),
        ("scripted.py:NOT_CALLABLE", "is a int, not a callable"),
        ("scripted.py:wrong_arity", "must take (messages, info)"),
        ("scripted.py", "is not function:PATH.py:NAME"),
    ],
)
def test_function_name_errors_say_what_is_missing(script: Path, suffix: str, expected: str) -> None:
    """Our design: a bad function: name fails when read (a usage error), saying what is wrong."""
    with pytest.raises(ModelSpecError) as raised:
        build_model(f"function:{script.parent}/{suffix}", role="coder")
    assert expected in str(raised.value)
    assert raised.value.failure_class == "env.setup"


def test_function_file_that_fails_to_import_names_the_error(tmp_path: Path) -> None:
    """Our design: an import-time failure in the script is reported as such, not as a missing name."""
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(ModelSpecError, match="importing broken.py failed: ModuleNotFoundError"):
        build_model(f"function:{broken}:answer", role="planner")


@pytest.mark.parametrize("name", ["gpt-4o", "nosuchprovider:model", "openai-chat:"])
def test_unresolvable_provider_names_fail_when_read(name: str) -> None:
    """Our design: a name no provider can serve is a usage error before any task starts."""
    with pytest.raises(ModelSpecError):
        build_model(name, role="planner")


async def test_missing_api_key_fails_at_the_call_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our design: building needs no key (workers start before config is known); the call names it."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = build_model("anthropic:claude-sonnet-4-5", role="coder")
    agent = Agent(model)
    with anyio.fail_after(10), pytest.raises(ModelNotConfigured) as raised:
        await agent.run("hi")
    assert raised.value.variable == "ANTHROPIC_API_KEY"
    assert "ANTHROPIC_API_KEY is not set" in str(raised.value)


def test_one_function_file_named_for_both_roles_is_loaded_once(script: Path) -> None:
    """Our choice: planner and coder named by one --model share the script's module state, as they
    would share one real model."""
    models = {role: build_model(f"function:{script}:answer", role=role) for role in ("planner", "coder")}
    assert models["planner"].wrapped.function is models["coder"].wrapped.function  # pyright: ignore[reportAttributeAccessIssue] - the built models are MeteredModels, which have wrapped
