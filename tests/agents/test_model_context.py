"""A prompt larger than the model's context window is an error naming both numbers, never a silent
truncation (`agents.models.context`): for `ollama:` and `openai-chat:` models behind a base URL,
with the window the server reports or the configuration gives.

The server is `fake_llm`'s real HTTP server (no Ollama or vLLM on these machines) answering as
those servers do; the local llama.cpp server is exercised for real in `tests/e2e/test_local_model.py`."""

import anyio
import pytest
from pydantic_ai import Agent

from agents.errors import AgentError
from agents.messages import ModelChain, ModelOptions
from agents.models.adapter import ModelCall, RetryPolicy, build_model, model_errors_as_agent_errors
from agents.models.context import ContextWindowExceeded
from tests.agents.fake_llm import Reply, completion, serve_fake_llm

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(base_delay_s=0.0, max_delay_s=0.0)
LONG_PROMPT = "Explain this code:\n" + "def f(x):\n    return x * 2  # doubles it\n" * 400  # ~18,000 chars


async def _ask(
    name: str, prompt: str, *, options: ModelOptions | None = None
) -> tuple[object, list[ModelCall]]:
    calls: list[ModelCall] = []
    chain = ModelChain(names=[name], options={name: options} if options else {})
    agent = Agent(build_model(chain, role="coder", on_call=calls.append, retry=FAST))
    with anyio.fail_after(20):
        try:
            with model_errors_as_agent_errors(model=name):
                return (await agent.run(prompt)).output, calls
        except AgentError as exc:
            return exc, calls


async def test_ollama_prompt_over_its_num_ctx_is_refused_naming_both_numbers(monkeypatch) -> None:
    """Issue contract: Ollama's num_ctx (2,048 here) would cut a longer prompt silently; codeloop
    refuses it before sending, naming the prompt's size and the window, class model.context."""
    show = {"parameters": 'num_ctx                        2048\nstop "<|im_end|>"'}
    async with serve_fake_llm(reports={"/api/show": show, "/api/ps": {"models": []}}) as fake:
        monkeypatch.setenv("OLLAMA_BASE_URL", fake.base_url)
        raised, calls = await _ask("ollama:qwen2.5-coder", LONG_PROMPT)
    assert isinstance(raised, ContextWindowExceeded), raised
    assert raised.failure_class == "model.context"
    assert raised.context_tokens == 2048 and raised.prompt_tokens is not None and raised.prompt_tokens > 2048
    assert "2,048" in str(raised) and f"{raised.prompt_tokens:,}" in str(raised)
    assert fake.requests == []  # nothing was sent to be cut
    assert [c.failure_class for c in calls] == ["model.context"]


async def test_ollama_prompt_within_its_context_is_sent(monkeypatch) -> None:
    """The check lets through what fits: the same prompt against a model configured with 8,192 tokens."""
    show = {"parameters": "num_ctx 8192"}
    async with serve_fake_llm(Reply(text="fits"), reports={"/api/show": show}) as fake:
        monkeypatch.setenv("OLLAMA_BASE_URL", fake.base_url)
        output, _ = await _ask("ollama:qwen2.5-coder", LONG_PROMPT)
    assert output == "fits"
    assert len(fake.requests) == 1


async def test_a_server_that_counted_its_whole_context_as_prompt_cut_it(monkeypatch) -> None:
    """A truncating server reports as many prompt tokens as its whole window: that is an error too."""
    cut = completion("answer to half a question", model="qwen2.5-coder", prompt_tokens=4096)
    async with serve_fake_llm(
        Reply(body=cut),
        reports={"/api/ps": {"models": [{"name": "qwen2.5-coder:latest", "context_length": 4096}]}},
    ) as fake:
        monkeypatch.setenv("OLLAMA_BASE_URL", fake.base_url)
        raised, _ = await _ask("ollama:qwen2.5-coder", "short question")
    assert isinstance(raised, ContextWindowExceeded), raised
    assert "4,096 prompt tokens" in str(raised) and "cut the prompt" in str(raised)


@pytest.mark.parametrize(
    "reports",
    [
        {"/props": {"default_generation_settings": {"n_ctx": 1024}}},  # llama.cpp's llama-server
        {"/v1/models": {"data": [{"id": "Qwen2.5-Coder-7B", "max_model_len": 1024}]}},  # vLLM
    ],
)
async def test_openai_compatible_server_reporting_its_context_gets_the_same_check(
    monkeypatch, reports
) -> None:
    """Issue contract: `openai-chat:` with a base URL gets the check where the server reports its context."""
    async with serve_fake_llm(reports=reports) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
        raised, _ = await _ask("openai-chat:Qwen2.5-Coder-7B", LONG_PROMPT)
    assert isinstance(raised, ContextWindowExceeded), raised
    assert "1,024" in str(raised)
    assert fake.requests == []


async def test_configured_context_tokens_win_over_what_the_server_reports(monkeypatch) -> None:
    """`context_tokens` under [model_settings] is the window, whatever the server says."""
    async with serve_fake_llm(reports={"/api/show": {"parameters": "num_ctx 131072"}}) as fake:
        monkeypatch.setenv("OLLAMA_BASE_URL", fake.base_url)
        raised, _ = await _ask("ollama:qwen2.5-coder", LONG_PROMPT, options=ModelOptions(context_tokens=3000))
    assert isinstance(raised, ContextWindowExceeded), raised
    assert raised.context_tokens == 3000
