"""The model's context window: a prompt that does not fit is an error naming both numbers.

Local servers are where prompts get cut without a word: Ollama keeps the last `num_ctx` tokens
(2,048 by default in many versions) of a longer prompt and answers as if nothing happened. So
before each request to a model whose context is known, the prompt is measured against it, and a
prompt that cannot fit fails with `ContextWindowExceeded` (class `model.context`) saying how large
the prompt is and how large the context — never a silent truncation. After the request, a server
that reports as many prompt tokens as its whole context (what a truncating server reports) fails
the same way.

Where the window comes from, first found wins:
- `context_tokens` under `[model_settings."NAME"]` (the user knows best);
- `local:` models: the context codeloop starts the server with;
- what the server reports: llama.cpp's `llama-server` (`/props` `n_ctx`, `/v1/models`
  `meta.n_ctx_train`), vLLM (`/v1/models` `max_model_len`), Ollama (`/api/show`: the model's
  `num_ctx` parameter, else `/api/ps`: the loaded model's `context_length`).

The prompt's size before the request is an estimate (the tokenizer is the server's): its
characters — instructions, messages and tool definitions as the server receives them in JSON —
at `CHARS_PER_TOKEN` characters a token, a figure code and English text rarely stay under, so
a prompt called too large is too large. The server's own count decides the rest: llama.cpp and
vLLM refuse an over-long prompt with both numbers, which arrives as the same error.
"""

import json
import logging
import math
from typing import Any

import httpx2
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import ModelRequestParameters

from agents.errors import ProviderRejected

log = logging.getLogger("codeloop.agents")

CHARS_PER_TOKEN = 4.0
"""Characters per token for the estimate; BPE tokenizers give 3–4 for code and English."""
_PROBE_TIMEOUT_S = 5.0


class ContextWindowExceeded(ProviderRejected):
    """The prompt does not fit the model's context window; the message names both numbers."""

    failure_class = "model.context"

    def __init__(
        self, message: str, *, prompt_tokens: int | None = None, context_tokens: int | None = None
    ) -> None:
        super().__init__(message, reason="context_window")
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


def estimate_prompt_tokens(messages: list[ModelMessage], parameters: ModelRequestParameters) -> int:
    """About how many tokens the request's prompt is (see the module docstring)."""
    text = ModelMessagesTypeAdapter.dump_json(messages).decode()
    tools = [
        {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema}
        for t in [*parameters.function_tools, *parameters.output_tools]
    ]
    text += json.dumps(tools)
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def check_fits(
    model: str, messages: list[ModelMessage], parameters: ModelRequestParameters, *, context_tokens: int
) -> int:
    """The estimated prompt tokens, after checking they fit `context_tokens`.

    Raises:
        ContextWindowExceeded: the estimate alone is over the window.
    """
    estimate = estimate_prompt_tokens(messages, parameters)
    if estimate >= context_tokens:
        raise ContextWindowExceeded(
            f"model {model}: the prompt is about {estimate:,} tokens and the model's context holds "
            f"{context_tokens:,}; {_ADVICE}",
            prompt_tokens=estimate,
            context_tokens=context_tokens,
        )
    return estimate


def check_reported(model: str, input_tokens: int, *, context_tokens: int) -> None:
    """After a response: the server's own prompt count filling the whole window means it cut the prompt.

    Raises:
        ContextWindowExceeded: `input_tokens` reached `context_tokens`.
    """
    if input_tokens >= context_tokens:
        raise ContextWindowExceeded(
            f"model {model}: the server counted {input_tokens:,} prompt tokens, its whole context of "
            f"{context_tokens:,}: it cut the prompt to fit; {_ADVICE}",
            prompt_tokens=input_tokens,
            context_tokens=context_tokens,
        )


_ADVICE = (
    "give the model a larger context (context_tokens under [model_settings], and the server's own "
    "setting: Ollama's num_ctx, llama.cpp's --ctx-size, vLLM's --max-model-len) or a shorter task"
)


async def probe_context_tokens(provider: str, model_name: str, base_url: str) -> int | None:
    """The context the server at `base_url` (an OpenAI-compatible `/v1` root) says `model_name`
    has, or None when it says nothing (or cannot be reached: the request itself will tell)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        async with httpx2.AsyncClient(timeout=_PROBE_TIMEOUT_S) as client:
            if provider == "ollama":
                return await _ollama_context(client, root, model_name)
            return await _openai_compatible_context(client, base_url.rstrip("/"), root, model_name)
    except (httpx2.HTTPError, ValueError) as exc:
        log.info("the context of %s at %s could not be read: %s", model_name, base_url, exc)
        return None


async def _ollama_context(client: httpx2.AsyncClient, root: str, model_name: str) -> int | None:
    shown = await client.post(f"{root}/api/show", json={"model": model_name})
    if shown.status_code == 200:
        for line in str(shown.json().get("parameters", "")).splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "num_ctx" and value.strip().isdigit():
                return int(value.strip())
    running = await client.get(f"{root}/api/ps")
    if running.status_code == 200:
        for loaded in running.json().get("models", []):
            if loaded.get("name") in (model_name, f"{model_name}:latest") and loaded.get("context_length"):
                return int(loaded["context_length"])
    return None


async def _openai_compatible_context(
    client: httpx2.AsyncClient, base: str, root: str, model_name: str
) -> int | None:
    props = await client.get(f"{root}/props")
    if props.status_code == 200:
        body: Any = props.json()
        n_ctx = (body.get("default_generation_settings") or {}).get("n_ctx") or body.get("n_ctx")
        if isinstance(n_ctx, int) and n_ctx > 0:
            return n_ctx
    models = await client.get(f"{base}/models")
    if models.status_code == 200:
        for entry in models.json().get("data", []):
            if entry.get("id") != model_name and len(models.json().get("data", [])) > 1:
                continue
            window = entry.get("max_model_len") or (entry.get("meta") or {}).get("n_ctx_train")
            if isinstance(window, int) and window > 0:
                return window
    return None
