"""The model adapter: how an LLM role gets its pydantic-ai model.

    choice = merge_choices(task_override, cli_flags, env_choice, config_file)   # highest first
    name = choice.for_role("coder")                 # None: diagnose mode, no model
    model = build_model(name, role="coder", on_call=publish_model_call)
    agent = Agent(model, output_type=...)           # no API key needed until the first request
    with model_errors_as_agent_errors():
        result = await agent.run(...)

A name is a pydantic-ai model name (`openai:…` for the Responses API, `openai-chat:…` for Chat
Completions and OpenAI-compatible servers through `OPENAI_BASE_URL`, `anthropic:…`, `ollama:…`
through `OLLAMA_BASE_URL`) or `function:PATH.py:NAME`, a scripted model with FunctionModel's
signature. Every request goes through `MeteredModel`: retried on infrastructure failures, metered,
logged on `codeloop.agents`, and reported as a `ModelCall`.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic_ai.exceptions import ModelAPIError, UnexpectedModelBehavior

from agents.errors import ModelMisbehaved
from agents.models._redact import _redact, trim
from agents.models.choice import LLM_ROLES, LlmRole, ModelChoice, merge_choices
from agents.models.metered import MeteredModel, ModelCall, OnCall, Spend
from agents.models.names import load_function_model, model_factory
from agents.models.retry import RetryPolicy, is_retryable, rejected, unavailable

__all__ = [
    "LLM_ROLES",
    "LlmRole",
    "MeteredModel",
    "ModelCall",
    "ModelChoice",
    "OnCall",
    "RetryPolicy",
    "Spend",
    "build_model",
    "build_role_models",
    "load_function_model",
    "merge_choices",
    "model_errors_as_agent_errors",
    "model_factory",
]


def build_model(
    name: str,
    *,
    role: str,
    on_call: OnCall | None = None,
    retry: RetryPolicy | None = None,
    base_dir: Path | None = None,
    cost_limit_usd: float | None = None,
) -> MeteredModel:
    """The metered model for `role` named `name`; see the module docstring. `cost_limit_usd`: the
    spend after which it refuses further requests (`CostBudgetExceeded`); None for no limit.

    Raises:
        ModelSpecError: `name` cannot be resolved (checked now; API keys are checked at the first call).
    """
    return MeteredModel(
        model_factory(name, base_dir=base_dir), name=name.strip(), role=role, on_call=on_call, retry=retry,
        spend=Spend(limit_usd=cost_limit_usd),
    )  # fmt: skip


def build_role_models(
    choice: ModelChoice,
    *,
    on_call: OnCall | None = None,
    retry: RetryPolicy | None = None,
    base_dir: Path | None = None,
) -> dict[LlmRole, MeteredModel]:
    """A metered model for every LLM role `choice` names; a role left out runs in diagnose mode.

    Raises:
        ModelSpecError: a named model cannot be resolved.
    """
    return {
        role: build_model(name, role=role, on_call=on_call, retry=retry, base_dir=base_dir)
        for role in LLM_ROLES
        if (name := choice.for_role(role)) is not None
    }


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
        raise ModelMisbehaved(f"{model}: {trim(_redact(str(exc)))}") from None
