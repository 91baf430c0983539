"""`local:PATH.gguf`: the llama.cpp server codeloop starts for a model file, with the real server
and the real SmolLM2 model (`tests/support/local_model.py`); skipped, saying what to install,
where either is missing."""

import os
from pathlib import Path

import anyio
import pytest
from pydantic_ai import Agent

from agents.errors import AgentError, ModelSpecError, ModelTruncated
from agents.messages import ModelChain, ModelOptions
from agents.models.adapter import ModelCall, build_model, model_errors_as_agent_errors
from agents.models.check import ModelNameProblem, check_model_name
from agents.models.context import ContextWindowExceeded
from agents.models.local import DEFAULT_CONTEXT_TOKENS
from agents.models.local_server import LocalServerError, LocalServers
from tests.processes import processes_mentioning
from tests.support.local_model import require_local_model

pytestmark = pytest.mark.anyio


async def _ask(
    name: str,
    prompt: str,
    servers: LocalServers,
    *,
    context_tokens: int | None = None,
    timeout_s: float | None = None,
):
    calls: list[ModelCall] = []
    options = {
        name: ModelOptions(context_tokens=context_tokens, temperature=0.0, max_tokens=24, timeout_s=timeout_s)
    }
    model = build_model(
        ModelChain(names=[name], options=options), role="coder", on_call=calls.append, local=servers
    )
    agent = Agent(model)
    try:
        with model_errors_as_agent_errors(model=name):
            return (await agent.run(prompt)).output, calls
    except AgentError as exc:
        return exc, calls


def _gone(pid: int) -> bool:
    """Whether process `pid` is gone, reaped too (a zombie still answers signal 0). By its id, not by
    the model's path: another test, a benchmark or a user's run may serve the same file meanwhile."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
async def test_the_server_starts_at_the_first_request_answers_and_is_reaped_with_its_owner(
    tmp_path: Path,
) -> None:
    """Issue contract: a local model's server starts on a free loopback port at its first request,
    is reused by the next, answers with the tokens it counted, and is gone (reaped) when its owner ends."""
    gguf = require_local_model()
    name = f"local:{gguf}"
    with anyio.fail_after(300):
        async with LocalServers(log_dir=tmp_path / "logs") as servers:
            assert servers.pids == []
            first, calls = await _ask(name, "Say hello.", servers)
            [pid] = servers.pids
            second, more = await _ask(name, "Say goodbye.", servers)
            assert servers.pids == [pid]
            assert processes_mentioning(gguf)
    assert isinstance(first, str) and isinstance(second, str), (first, second)
    assert [c.outcome for c in calls + more] == ["ok", "ok"]
    assert all(c.input_tokens > 0 and c.output_tokens > 0 and c.cost_usd == 0.0 for c in calls + more)
    assert _gone(pid)


async def test_a_cancelled_owner_still_kills_and_reaps_its_server(tmp_path: Path) -> None:
    """Structured concurrency: cancelling the block that owns the servers stops them too."""
    gguf = require_local_model()
    with anyio.fail_after(300):
        with anyio.CancelScope() as scope:
            async with LocalServers(log_dir=tmp_path / "logs") as servers:
                await servers.endpoint(gguf, context_tokens=2048)
                [pid] = servers.pids
                scope.cancel()
                await anyio.sleep_forever()
    assert _gone(pid)


@pytest.mark.slow
async def test_a_response_past_its_deadline_is_truncated_and_the_next_request_gets_a_new_server(
    tmp_path: Path,
) -> None:
    """A response past its deadline (`timeout_s`) fails `model.truncated`, once, not retried.
    llama-cpp-python's server would go on computing it for nobody, holding the model, and every
    later request would wait behind it (a tool call that never stops: until the context is full):
    that server is stopped and reaped, and the next request is answered by a new one."""
    gguf = require_local_model()
    name = f"local:{gguf}"
    prompt = "Summarise this code.\n" + "def add(a, b):\n    return a + b\n\n" * 80  # ~1,000 tokens
    with anyio.fail_after(300):
        async with LocalServers(log_dir=tmp_path / "logs") as servers:
            await servers.endpoint(gguf, context_tokens=DEFAULT_CONTEXT_TOKENS)
            [first] = servers.pids
            raised, calls = await _ask(name, prompt, servers, timeout_s=0.01)
            assert servers.pids == []
            answer, more = await _ask(name, "Say hello.", servers)
            [second] = servers.pids
    assert isinstance(raised, ModelTruncated), raised
    assert raised.failure_class == "model.truncated"
    assert [(c.outcome, c.attempts) for c in calls] == [("misbehaved", 1)]
    assert isinstance(answer, str) and second != first
    assert [c.outcome for c in more] == ["ok"]
    assert _gone(first) and _gone(
        second
    )  # the first when its response was given up, the second with its owner


async def test_a_prompt_over_the_context_is_refused_by_the_server_naming_both_numbers(tmp_path: Path) -> None:
    """Issue contract: a prompt larger than the model's context is an error naming both numbers,
    never a silent truncation. Digits tokenize one a token, so this prompt passes the character
    estimate and meets the server's own count."""
    gguf = require_local_model()
    prompt = "Add these up: " + " ".join("7" * 4 for _ in range(300))  # ~1,500 tokens, ~1,500 characters
    with anyio.fail_after(300):
        async with LocalServers(log_dir=tmp_path / "logs") as servers:
            raised, calls = await _ask(f"local:{gguf}", prompt, servers, context_tokens=1024)
    assert isinstance(raised, ContextWindowExceeded), raised
    assert raised.failure_class == "model.context"
    assert "1024" in str(raised) or "1,024" in str(raised)
    assert [c.failure_class for c in calls] == ["model.context"]


async def test_a_prompt_codeloop_can_tell_is_too_large_is_not_sent(tmp_path: Path) -> None:
    """The estimate refuses what cannot fit before the server is even started."""
    gguf = require_local_model()
    with anyio.fail_after(60):
        async with LocalServers(log_dir=tmp_path / "logs") as servers:
            raised, _ = await _ask(f"local:{gguf}", "word " * 3000, servers, context_tokens=1024)
            assert servers.pids == []
    assert isinstance(raised, ContextWindowExceeded), raised
    assert "the model's context holds 1,024" in str(raised)


async def test_a_file_the_server_cannot_load_fails_the_request_with_its_log(tmp_path: Path) -> None:
    """A GGUF file llama.cpp cannot load: the server exits while starting, and the step fails
    `env.setup` quoting the end of its log, not a hang until the start timeout."""
    require_local_model()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with anyio.fail_after(120):
        async with LocalServers(log_dir=tmp_path / "logs") as servers:
            with pytest.raises(LocalServerError) as raised:
                await servers.endpoint(broken, context_tokens=1024)
    assert raised.value.failure_class == "env.setup"
    assert "exited" in str(raised.value) and str(tmp_path / "logs") in str(raised.value)
    assert processes_mentioning(broken) == []


def test_names_of_files_that_are_no_model_are_refused_before_anything_starts(tmp_path: Path) -> None:
    """Our contract (`config check`, every run): a missing file or one that is not GGUF is a usage error."""
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    for name, words in [
        (f"local:{tmp_path / 'missing.gguf'}", "does not exist"),
        (f"local:{text}", "is not a GGUF file"),
    ]:
        with pytest.raises(ModelNameProblem, match=words):
            check_model_name(name)
        with pytest.raises(ModelSpecError, match="GGUF|cannot be read"):
            build_model(name, role="coder")
