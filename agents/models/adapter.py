"""The model adapter: how an LLM role gets its pydantic-ai model.

    name = task.models.for_role("coder")            # None: diagnose mode, no model
    model = build_model(name, role="coder", on_call=publish_model_call)
    # or, with the task's fallbacks and per-model settings (`ModelNames.chain_for`):
    model = build_model(task.models.chain_for("coder"), role="coder", on_call=publish_model_call)
    agent = Agent(model, output_type=...)           # no API key needed until the first request
    with model_errors_as_agent_errors():
        result = await agent.run(...)

A name is a pydantic-ai model name (`openai:…` for the Responses API, `openai-chat:…` for Chat
Completions and OpenAI-compatible servers through `OPENAI_BASE_URL`, `anthropic:…`, `ollama:…`
through `OLLAMA_BASE_URL`) or `function:PATH.py:NAME`, a scripted model with FunctionModel's
signature. Every request goes through `MeteredModel`: retried on infrastructure failures, metered,
logged on `codeloop.agents`, and reported as a `ModelCall`. A `ModelChain` of several names
becomes a `FallbackChain` of metered models: the next is tried after a provider error of the one
before (`agents.models.fallback`).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic_ai.exceptions import ModelAPIError, OutputTokenLimitExceeded, UnexpectedModelBehavior
from pydantic_ai.models import Model

from agents.errors import ModelMisbehaved, ModelTruncated
from agents.messages import ModelChain, ModelOptions
from agents.models._redact import _redact, trim
from agents.models.fallback import FallbackChain
from agents.models.local import local_model_path
from agents.models.local_server import LocalServers
from agents.models.metered import MeteredModel, ModelCall, OnCall, Spend
from agents.models.names import load_function_model, model_factory
from agents.models.retry import RetryPolicy, is_retryable, rejected, unavailable

__all__ = [
    "FallbackChain",
    "MeteredModel",
    "ModelCall",
    "OnCall",
    "RetryPolicy",
    "Spend",
    "build_model",
    "load_function_model",
    "model_errors_as_agent_errors",
    "model_factory",
    "silence_library_banner",
]


def build_model(
    name: str | ModelChain,
    *,
    role: str,
    on_call: OnCall | None = None,
    retry: RetryPolicy | None = None,
    base_dir: Path | None = None,
    cost_limit_usd: float | None = None,
    local: LocalServers | None = None,
) -> Model:
    """The metered model for `role` named `name` (a `FallbackChain` of metered models when `name`
    is a chain with fallbacks); see the module docstring. `cost_limit_usd`: the spend after which
    it refuses further requests (`CostBudgetExceeded`); None for no limit. Every model of a chain
    shares one `Spend`, which the returned model carries as `spend`. `local`: the servers of
    `local:` models (`agents.models.local_server`); without them such a model fails at its first call.

    Raises:
        ModelSpecError: a name cannot be resolved (checked now; API keys are checked at the first call).
    """
    silence_library_banner()
    chain = name if isinstance(name, ModelChain) else ModelChain(names=[name])
    spend = Spend(limit_usd=cost_limit_usd)
    models = [
        MeteredModel(
            model_factory(
                one,
                base_dir=base_dir,
                local=local,
                context_tokens=options.context_tokens,
                timeout_s=options.timeout_s,
            ),
            name=one.strip(),
            role=role,
            on_call=on_call,
            # A local model's response deadline is its own (`LocalModel`): past it the model did
            # not stop, which another attempt does not cure, and its server is stopped. Neither an
            # attempt deadline nor the HTTP client's timeout may race it: either would end the
            # request as retryable and send the next attempt to wait behind the abandoned one.
            retry=_retry_for(retry, metered),
            options=metered,
            spend=spend,
        )
        for one in chain.names
        for options in [chain.options.get(one, ModelOptions())]
        for metered in [options.model_copy(update={"timeout_s": None}) if is_local(one) else options]
    ]
    return models[0] if len(models) == 1 else FallbackChain(*models)


def is_local(name: str) -> bool:
    """Whether `name` is a `local:PATH.gguf` model."""
    return local_model_path(name.strip()) is not None


def silence_library_banner() -> None:
    """Keep pydantic-ai's first-run banner (an advertisement for its hosted observability service)
    out of codeloop's interface: printed on stderr at an agent's first request, it tears through
    the live view of every terminal run with a model. `BANNER_ENABLED` is the library's own switch
    (read at every run, `pydantic_ai._display`); `PYDANTIC_AI_NO_BANNER` is its environment one,
    which the CLI sets for the processes it starts."""
    import pydantic_ai

    pydantic_ai.BANNER_ENABLED = False


def _retry_for(retry: RetryPolicy | None, options: ModelOptions) -> RetryPolicy:
    """`retry` (or the default policy) with the attempts and attempt deadline `options` configure."""
    policy = retry or RetryPolicy()
    update = {
        key: value
        for key, value in (("max_attempts", options.max_attempts), ("attempt_timeout_s", options.timeout_s))
        if value is not None
    }
    return policy.model_copy(update=update) if update else policy


@contextmanager
def model_errors_as_agent_errors(*, model: str = "the model") -> Iterator[None]:
    """Around `agent.run`: the model's unusable output (pydantic-ai's `UnexpectedModelBehavior`, e.g.
    output that failed validation more often than the agent's retries allow) becomes `ModelMisbehaved`,
    and a provider error that bypassed `MeteredModel` becomes `ProviderUnavailable`/`ProviderRejected`.
    Budget and deadline errors (`UsageLimitExceeded`, `RunTimedOut`) pass through for the caller to class."""
    try:
        yield
    except ModelAPIError as exc:
        raise (
            unavailable(exc, model=model, attempts=1) if is_retryable(exc) else rejected(exc, model=model)
        ) from None
    except UnexpectedModelBehavior as exc:
        raise misbehaved(exc, model=model) from None


def misbehaved(exc: UnexpectedModelBehavior, *, model: str) -> ModelMisbehaved:
    """The agents' error for output pydantic-ai could not use: `ModelTruncated` when the response
    ran into the token limit (a model that does not stop), else `ModelMisbehaved`."""
    text = f"{model}: {trim(_redact(str(exc)))}"
    return ModelTruncated(text) if isinstance(exc, OutputTokenLimitExceeded) else ModelMisbehaved(text)
