"""`MeteredModel`: the one door every model request of a role goes through.

It wraps the real model (built lazily, see `names`), and for each request:
- retries infrastructure failures under a `RetryPolicy` and turns what is left into the agents'
  typed errors (`ProviderUnavailable`, `ProviderRejected`, `ModelMisbehaved`);
- meters it: tokens in/out, latency, attempts, cost where genai-prices knows the model, else at
  the price configured for it (`ModelOptions.input_usd_per_mtok` / `output_usd_per_mtok`), and
  adds the cost to what the role's model has spent (`Spend`, the role's `Usage.cost_usd`);
- refuses a request once that spend reached the step's share of the task's cost budget
  (`Spend.limit_usd`), so the budget is checked before every model call, not only between steps;
- applies the model's configured settings (temperature, max tokens, timeout) under the run's own;
- reports it as a `ModelCall` to the role's `on_call` (so the role can publish an event) and as
  one log line on the `codeloop.agents` logger.

Nothing leaves in full: errors and the output preview are redacted and trimmed to ~200 chars.
"""

import dataclasses
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Literal

import anyio
from pydantic import BaseModel, ConfigDict
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ModelAPIError, OutputTokenLimitExceeded, UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from agents.errors import (
    AgentError,
    CostBudgetExceeded,
    ModelMisbehaved,
    ModelNotConfigured,
    ModelTruncated,
    ProviderRejected,
    ProviderUnavailable,
)
from agents.messages import ModelOptions
from agents.models._redact import _redact, trim
from agents.models.local import LocalModel
from agents.models.names import ModelFactory
from agents.models.retry import RetryPolicy, describe, is_retryable, rejected, unavailable

logger = logging.getLogger("codeloop.agents")

Outcome = Literal["ok", "unavailable", "rejected", "not_configured", "misbehaved", "error"]


class ModelCall(BaseModel):
    """One model request of a role, as metered (after its retries)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    role: str
    """The role that made the request (planner, coder, ...)."""
    model: str
    """The model name as configured (`openai-chat:gpt-4o`, `function:script.py:NAME`)."""
    outcome: Outcome
    """ok, or how the request failed."""
    input_tokens: int = 0
    """Tokens sent, as the provider counted them (estimated by FunctionModel)."""
    output_tokens: int = 0
    """Tokens received."""
    latency_s: float
    """From the first attempt's start to the outcome, back-off included."""
    attempts: int
    """Attempts made, the first included."""
    backoff_s: float = 0.0
    """Time spent waiting between attempts."""
    cost_usd: float | None = None
    """Price of the request in US dollars; None when neither genai-prices nor the configuration
    prices the model."""
    failure_class: str | None = None
    """The failure class of a request that did not succeed (env.infra, env.setup, agent.format)."""
    error: str | None = None
    """What went wrong, redacted and trimmed."""
    output_preview: str | None = None
    """The start of the response (text, tool calls by name and arguments), redacted and trimmed."""


OnCall = Callable[[ModelCall], Awaitable[None] | None]
"""Receives every `ModelCall`; may be async (to publish an event). Its errors propagate."""


@dataclass
class Spend:
    """What a role's model has cost in one step, and the limit after which it refuses requests."""

    limit_usd: float | None = None
    """The step's share of the task's cost budget; None for no limit."""
    spent_usd: float | None = None
    """US dollars of the successful requests; None while none had a known price."""

    def add(self, cost_usd: float | None) -> None:
        if cost_usd is not None:
            self.spent_usd = (self.spent_usd or 0.0) + cost_usd

    def check(self) -> None:
        """Before a request. Raises `CostBudgetExceeded` once the spend reached the limit."""
        if self.limit_usd is not None and (self.spent_usd or 0.0) >= self.limit_usd:
            raise CostBudgetExceeded(
                f"the cost budget is used up: ${self.spent_usd or 0.0:.4f} spent of the "
                f"${self.limit_usd:.4f} this step had left"
            )


class MeteredModel(WrapperModel):
    """A pydantic-ai model that retries, meters and reports every request of one role."""

    def __init__(
        self,
        model: Model | ModelFactory,
        *,
        name: str,
        role: str,
        on_call: OnCall | None = None,
        retry: RetryPolicy | None = None,
        options: ModelOptions | None = None,
        spend: "Spend | None" = None,
    ) -> None:
        # WrapperModel.__init__ would build the wrapped model now, reading API keys; see `names`.
        Model.__init__(self)
        self._factory: ModelFactory = (lambda: model) if isinstance(model, Model) else model
        self._built: Model | None = None
        self.name = name
        self.role = role
        self.on_call = on_call
        self.retry = retry or RetryPolicy()
        self.options = options or ModelOptions()
        self.spend = spend or Spend()
        """What this model's requests cost, shared with the other models of a fallback chain."""

    @property
    def wrapped(self) -> Model:
        """The real model, built at first use. Raises `ModelNotConfigured` while a variable is unset."""
        if self._built is None:
            try:
                self._built = self._factory()
            except ModelNotConfigured as exc:
                # Raised while the run is prepared, before any request: this line is its only record here.
                logger.warning(
                    _redact(f"model call role={self.role} model={self.name} outcome=not_configured: {exc}")
                )
                raise
        return self._built

    def __repr__(self) -> str:
        return f"MeteredModel(name={self.name!r}, role={self.role!r})"

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        self.spend.check()
        meter = _Meter(self)
        settings = _without_sdk_retries(model_settings, self.options)
        while True:
            try:
                with _deadline(self.retry.attempt_timeout_s):
                    response = await self.wrapped.request(messages, settings, model_request_parameters)
            except Exception as exc:
                await meter.failed_attempt(exc)
                continue
            await meter.succeeded(response)
            return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[object] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        # Only opening the stream is retried: a stream that broke after yielding parts cannot be
        # replayed without the caller seeing them twice, so it fails as classified. No attempt
        # deadline here: a cancel scope closed while the stream it opened is still open breaks
        # anyio's nesting; streams take pydantic-ai's `first_event_timeout` setting instead.
        self.spend.check()
        meter = _Meter(self)
        settings = _without_sdk_retries(model_settings, self.options)
        while True:
            stack = AsyncExitStack()
            try:
                stream = await stack.enter_async_context(
                    self.wrapped.request_stream(messages, settings, model_request_parameters, run_context)
                )
            except Exception as exc:
                await stack.aclose()
                await meter.failed_attempt(exc)
                continue
            break
        try:
            async with stack:
                yield stream
        except Exception as exc:
            await meter.failed_attempt(exc, final=True)
            raise
        await meter.succeeded(stream.get())


class _Meter:
    """The bookkeeping of one request across its attempts."""

    def __init__(self, model: MeteredModel) -> None:
        self.model = model
        self.started = time.perf_counter()
        self.attempts = 0
        self.backoff_s = 0.0

    async def succeeded(self, response: ModelResponse) -> None:
        self.attempts += 1
        await self._report("ok", response=response)

    async def failed_attempt(self, exc: Exception, *, final: bool = False) -> None:
        """Wait and return when `exc` is worth another attempt; otherwise raise the agents' error."""
        self.attempts += 1
        policy, name = self.model.retry, self.model.name
        if isinstance(exc, AgentError):
            await self._report(_outcome(exc), error=exc)
            raise exc
        if isinstance(exc, UnexpectedModelBehavior):
            text = f"model {name}: {trim(_redact(str(exc)))}"
            error: AgentError = (
                ModelTruncated(text) if isinstance(exc, OutputTokenLimitExceeded) else ModelMisbehaved(text)
            )
        elif not is_retryable(exc):
            if not isinstance(exc, ModelAPIError):
                await self._report("error", error=exc)
                raise exc
            error = rejected(exc, model=name)
        elif final or self.attempts >= policy.max_attempts:
            error = unavailable(exc, model=name, attempts=self.attempts)
        else:
            retry_after = getattr(exc, "retry_after", None)
            if retry_after is not None and retry_after > policy.max_delay_s:
                error = unavailable(
                    exc, model=name, attempts=self.attempts, why=f"(it asked to wait {retry_after:g}s)"
                )
            else:
                delay = policy.delay_s(self.attempts, retry_after_s=retry_after)
                logger.warning(
                    _redact(
                        f"model call retry role={self.model.role} model={name} attempt={self.attempts}/"
                        f"{policy.max_attempts} wait={delay:.3f}s: {describe(exc)}"
                    )
                )
                self.backoff_s += delay
                await anyio.sleep(delay)
                return
        await self._report(_outcome(error), error=error)
        raise error from None

    async def _report(
        self, outcome: Outcome, *, response: ModelResponse | None = None, error: BaseException | None = None
    ) -> None:
        usage = response.usage if response is not None else None
        call = ModelCall(
            role=self.model.role,
            model=self.model.name,
            outcome=outcome,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            latency_s=round(time.perf_counter() - self.started, 6),
            attempts=self.attempts,
            backoff_s=round(self.backoff_s, 6),
            cost_usd=_cost_usd(
                response,
                self.model.options,
                priced_as=getattr(self.model._built, "priced_as", None),
                free=isinstance(self.model._built, LocalModel),
            )
            if response is not None
            else None,
            failure_class=error.failure_class if isinstance(error, AgentError) else None,
            error=trim(_redact(str(error))) if error is not None else None,
            output_preview=_preview(response) if response is not None else None,
        )
        self.model.spend.add(call.cost_usd)
        _log(call)
        if self.model.on_call is not None:
            result = self.model.on_call(call)
            if inspect.isawaitable(result):
                await result


def _outcome(error: AgentError) -> Outcome:
    if isinstance(error, ProviderUnavailable):
        return "unavailable"
    if isinstance(error, ProviderRejected):
        return "rejected"
    if isinstance(error, ModelNotConfigured):
        return "not_configured"
    if isinstance(error, ModelMisbehaved):
        return "misbehaved"
    return "error"


def _without_sdk_retries(settings: ModelSettings | None, options: ModelOptions) -> ModelSettings:
    # The configured settings apply per model (each model of a fallback chain has its own), under
    # what the run sets. Ours is the only retry loop (see `retry`); models that ignore the setting
    # (FunctionModel) are unaffected.
    configured: ModelSettings = {}
    if options.temperature is not None:
        configured["temperature"] = options.temperature
    if options.max_tokens is not None:
        configured["max_tokens"] = options.max_tokens
    if options.timeout_s is not None:
        configured["timeout"] = options.timeout_s
    return {**configured, **(settings or {}), "max_retries": 0}


def _deadline(timeout_s: float | None) -> AbstractContextManager[object]:
    return anyio.fail_after(timeout_s) if timeout_s is not None else nullcontext()


def _cost_usd(
    response: ModelResponse, options: ModelOptions, *, priced_as: str | None = None, free: bool = False
) -> float | None:
    """The response's price from genai-prices' table, else at the configured price; `priced_as`
    prices a scripted model's reported usage as that model's (a `function:` callable's attribute);
    `free`: a model run on this machine (`local:`), zero unless a price is configured."""
    if free and not options.priced:
        return 0.0
    if priced_as is not None:
        response = dataclasses.replace(response, model_name=priced_as, provider_name=None)
    try:
        return float(response.cost().total_price)
    except (LookupError, ValueError, AssertionError):
        pass  # genai-prices does not know this model (function:, local servers) or its usage
    if not options.priced:
        return None
    usage = response.usage
    per_token_in = (options.input_usd_per_mtok or 0.0) / 1e6
    per_token_out = (options.output_usd_per_mtok or 0.0) / 1e6
    return (usage.input_tokens or 0) * per_token_in + (usage.output_tokens or 0) * per_token_out


def _preview(response: ModelResponse) -> str:
    pieces: list[str] = []
    for part in response.parts:
        if isinstance(part, TextPart):
            pieces.append(part.content)
        elif isinstance(part, ToolCallPart):
            pieces.append(f"{part.tool_name}({part.args_as_json_str()})")
    return trim(_redact(" ".join(pieces)))


def _log(call: ModelCall) -> None:
    cost = f"${call.cost_usd:.6f}" if call.cost_usd is not None else "unknown"
    line = (
        f"model call role={call.role} model={call.model} outcome={call.outcome} in={call.input_tokens} "
        f"out={call.output_tokens} latency={call.latency_s:.3f}s attempts={call.attempts} cost={cost}"
    )
    if call.error:
        line += f" error={call.error!r}"
    if call.output_preview:
        line += f" output={call.output_preview!r}"
    # Redacted once more as a whole: the configured name itself could hold a pasted key.
    logger.log(logging.INFO if call.outcome == "ok" else logging.WARNING, _redact(line))
