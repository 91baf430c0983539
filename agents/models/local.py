"""`local:PATH.gguf`: a model file served by llama.cpp on this machine, and the context checks.

    model = build_model("local:/models/SmolLM2-135M-Instruct.Q4_1.gguf", role="coder", local=servers)

`LocalModel` starts (through `LocalServers`, `agents.models.local_server`) llama-cpp-python's
OpenAI-compatible server for the file at its first request, then talks to it as any
`openai-chat:` model: the same Chat Completions path, metered and retried by `MeteredModel`. The
server's context is set explicitly (`context_tokens`, default `DEFAULT_CONTEXT_TOKENS`), and every
prompt is checked against it (`agents.models.context`).

`ContextChecked` gives `ollama:` and `openai-chat:` models served from a base URL the same check,
with the window the configuration gives or the server reports.

A local model costs nothing: its requests are priced at zero, so a cost budget still applies to
the other models of a task.
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from agents.errors import ModelNotConfigured, ModelTruncated
from agents.models.context import check_fits, check_reported, probe_context_tokens
from agents.models.local_server import LocalServers

LOCAL_PREFIX = "local:"
DEFAULT_CONTEXT_TOKENS = 8192
"""The context a local server is started with unless `context_tokens` says otherwise: what
SmolLM2 and most small instruct models were trained with, and room for the coder's prompt and
tool definitions (about 3,000 tokens) and a few turns."""
RESPONSE_TIMEOUT_S = 240.0
"""How long one response of a local model may take unless `timeout_s` says otherwise. llama-cpp-python's
tool-calling handler ignores `max_tokens`, so a model that never stops (a grammar-bound JSON
array that grows forever) would generate until its context is full: past this it is cut off as
`model.truncated`, and its server, which would go on computing the abandoned response, is
stopped (`LocalServers.discard`): the next request starts a new one."""
_HTTP_GRACE_S = 30.0
"""The HTTP client's timeout is the response's deadline plus this: the deadline ends the request
first, as `model.truncated` (and stops the server), never the client's read timeout, which would
end it as a retryable error (pydantic-ai's default, 600 s, would cut a longer deadline short)."""
_PLACEHOLDER_URL = "http://127.0.0.1:9/v1"
"""The OpenAI client needs a URL before the server has a port; no request is ever sent to it."""
_API_KEY = "local"
"""llama-cpp-python's server takes any key when started without one; the OpenAI client wants one."""


def local_model_path(name: str) -> Path | None:
    """The model file a `local:PATH` name names (`~` expanded, not resolved), None for other names."""
    if not name.startswith(LOCAL_PREFIX):
        return None
    return Path(name[len(LOCAL_PREFIX) :].strip()).expanduser()


class LocalModel(WrapperModel):
    """A GGUF file behind a llama.cpp server this process starts; see the module docstring."""

    def __init__(
        self,
        path: Path,
        *,
        servers: LocalServers | None,
        context_tokens: int | None = None,
        response_timeout_s: float | None = None,
    ) -> None:
        self.path = path
        self.servers = servers
        self.context_tokens = context_tokens or DEFAULT_CONTEXT_TOKENS
        self.response_timeout_s = response_timeout_s or RESPONSE_TIMEOUT_S
        self._base_url = _PLACEHOLDER_URL
        super().__init__(_chat_model(path.stem, _PLACEHOLDER_URL))

    @property
    def model_name(self) -> str:
        return self.path.stem

    @property
    def system(self) -> str:
        return "llama.cpp"

    async def _ready(self) -> None:
        if self.servers is None:
            raise ModelNotConfigured(
                f"model local:{self.path} needs a process that runs local models (a codeloop serve or "
                "run); this one was built without one"
            )
        endpoint = await self.servers.endpoint(self.path, context_tokens=self.context_tokens)
        if endpoint.base_url != self._base_url:
            self._base_url = endpoint.base_url
            self.wrapped = _chat_model(self.path.stem, endpoint.base_url)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        name = f"{LOCAL_PREFIX}{self.path}"
        check_fits(name, messages, model_request_parameters, context_tokens=self.context_tokens)
        await self._ready()
        settings: ModelSettings = {
            **(model_settings or {}),
            "timeout": self.response_timeout_s + _HTTP_GRACE_S,
        }
        with anyio.move_on_after(self.response_timeout_s) as waiting:
            response = await self.wrapped.request(messages, settings, model_request_parameters)
        if waiting.cancelled_caught:
            if self.servers is not None:
                await self.servers.discard(self.path, context_tokens=self.context_tokens)
            raise ModelTruncated(
                f"model {name} did not finish its response within {self.response_timeout_s:g} s: it did not "
                "stop (or the machine is too slow for it; raise timeout_s under [model_settings])"
            )
        check_reported(name, response.usage.input_tokens or 0, context_tokens=self.context_tokens)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[object] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        check_fits(
            f"{LOCAL_PREFIX}{self.path}",
            messages,
            model_request_parameters,
            context_tokens=self.context_tokens,
        )
        await self._ready()
        async with self.wrapped.request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as stream:
            yield stream


class ContextChecked(WrapperModel):
    """A provider model whose prompts are checked against its context window (module docstring):
    the configured one, else the one its server reports, asked once at the first request."""

    def __init__(self, wrapped: Model, *, name: str, provider: str, context_tokens: int | None) -> None:
        super().__init__(wrapped)
        self.name = name
        self.provider_key = provider
        self.context_tokens = context_tokens
        self._probed = context_tokens is not None

    async def _window(self) -> int | None:
        if not self._probed:
            self._probed = True
            base_url = _base_url_of(self.provider_key)
            if base_url is not None:
                self.context_tokens = await probe_context_tokens(
                    self.provider_key, self.wrapped.model_name, base_url
                )
        return self.context_tokens

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        window = await self._window()
        if window is not None:
            check_fits(self.name, messages, model_request_parameters, context_tokens=window)
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        if window is not None:
            check_reported(self.name, response.usage.input_tokens or 0, context_tokens=window)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[object] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        window = await self._window()
        if window is not None:
            check_fits(self.name, messages, model_request_parameters, context_tokens=window)
        async with self.wrapped.request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as stream:
            yield stream


CHECKED_PROVIDERS = {"ollama": "OLLAMA_BASE_URL", "openai-chat": "OPENAI_BASE_URL", "vllm": "VLLM_BASE_URL"}
"""Providers whose server may be local, and the variable naming its URL: their models get
`ContextChecked` (for `openai-chat:`, only with a base URL: OpenAI's own service truncates nothing)."""


def _base_url_of(provider: str) -> str | None:
    variable = CHECKED_PROVIDERS.get(provider)
    return (os.environ.get(variable) or None) if variable else None


def _chat_model(model_name: str, base_url: str) -> Model:
    """The Chat Completions model of a local server. Imported here, not at the top: the OpenAI SDK
    it needs is 0.7 s of CPU to import, which every serve and run would otherwise pay for a model
    few of them use."""
    from agents.models.llama_chat import llama_chat_model

    return llama_chat_model(model_name, base_url, api_key=_API_KEY)
