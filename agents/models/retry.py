"""Provider failures sorted into infrastructure (retry, then `ProviderUnavailable`) and refusals.

pydantic-ai already maps every provider SDK's errors to categories (`ModelRateLimitError`,
`ModelServerError`, `ModelConnectionError`, `ModelAuthenticationError`, ...); this module only
decides what each category means for a task. Retrying is ours alone: the provider SDKs' own
retries are switched off per request (`max_retries=0`), so one policy with one budget of attempts
applies to every provider and every attempt is visible in the log.
"""

import random

from pydantic import BaseModel, ConfigDict, Field
from pydantic_ai.exceptions import (
    AgentRunError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelRequestTimeout,
    ModelServerError,
    ModelUnavailableError,
)

from agents.errors import ProviderRejected, ProviderUnavailable
from agents.models._redact import _redact, trim
from agents.models.context import ContextWindowExceeded

# 408 is the server saying it timed out waiting for us: a timeout, so it is retried like one.
_RETRIED_STATUS = frozenset({408, 429})


class RetryPolicy(BaseModel):
    """How often and how patiently a model request is retried after an infrastructure failure."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    max_attempts: int = Field(default=4, ge=1)
    """Attempts in all, the first included; then the request fails with `ProviderUnavailable`."""
    base_delay_s: float = Field(default=1.0, ge=0)
    """Back-off before the second attempt; doubled for each attempt after it."""
    max_delay_s: float = Field(default=30.0, ge=0)
    """Cap on one back-off; a provider asking (Retry-After) for longer than this is given up on now."""
    jitter: float = Field(default=0.5, ge=0, le=1)
    """Fraction of each back-off drawn at random, so workers throttled together spread out."""
    attempt_timeout_s: float | None = Field(default=None, gt=0)
    """Deadline for one non-streamed attempt (None: the provider SDK's own timeout); an expired one
    is retried. Streamed requests take pydantic-ai's `first_event_timeout` model setting instead."""

    def delay_s(self, attempt: int, *, retry_after_s: float | None = None) -> float:
        """Back-off after failed attempt number `attempt` (1-based); the provider's Retry-After wins."""
        if retry_after_s is not None:
            return max(0.0, retry_after_s)
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return backoff * (1 - self.jitter * random.random())


def is_retryable(exc: BaseException) -> bool:
    """True for failures another attempt may not meet: rate limits, 5xx, timeouts, lost connections."""
    if isinstance(exc, AgentRunError) and not isinstance(exc, ModelAPIError):
        return False  # the run's own deadline (RunTimedOut is a TimeoutError too) or limits: never retried
    if isinstance(exc, TimeoutError):
        return True
    if isinstance(exc, ModelQuotaExceededError | ModelRequestRejectedError):
        return False
    if isinstance(exc, ModelRateLimitError | ModelUnavailableError | ModelServerError | ModelConnectionError):
        return True
    if isinstance(exc, ModelRequestTimeout):
        return True
    if isinstance(exc, ModelHTTPError):
        return exc.status_code in _RETRIED_STATUS or exc.status_code >= 500
    return False


def describe(exc: BaseException) -> str:
    """A short, redacted account of a provider failure, safe for logs, events and CLI output."""
    if isinstance(exc, ModelHTTPError):
        text = f"HTTP {exc.status_code}: {_body_text(exc)}"
    elif isinstance(exc, TimeoutError):
        text = f"timed out ({type(exc).__name__})"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return trim(_redact(text))


def unavailable(
    exc: BaseException, *, model: str, attempts: int, why: str | None = None
) -> ProviderUnavailable:
    """The error a request raises once its retries are spent (or the provider asked for too long a wait)."""
    status = exc.status_code if isinstance(exc, ModelHTTPError) else None
    reason = why or f"after {attempts} attempt{'s' if attempts != 1 else ''}"
    return ProviderUnavailable(
        f"model {model} unavailable {reason}: {describe(exc)}", attempts=attempts, status_code=status
    )


def rejected(exc: ModelAPIError, *, model: str) -> ProviderRejected:
    """The error for a request the provider refused: not retried, someone must change the set-up."""
    if isinstance(exc, ModelAuthenticationError):
        reason, hint = "auth", "check the API key and that it may use this model"
    elif isinstance(exc, ModelNotFoundError):
        reason, hint = "not_found", "check the model name and the provider's base URL"
    elif isinstance(exc, ModelQuotaExceededError):
        reason, hint = "quota", "the account's quota or credit is exhausted"
    elif isinstance(exc, ModelContextWindowExceededError):
        return ContextWindowExceeded(
            f"model {model} rejected the request: the prompt does not fit the model's context window "
            f"(the server's words: {describe(exc)})"
        )
    else:
        reason, hint = "bad_request", "the provider refused the request as sent"
    status = exc.status_code if isinstance(exc, ModelHTTPError) else None
    return ProviderRejected(
        f"model {model} rejected the request ({hint}): {describe(exc)}", reason=reason, status_code=status
    )


def _body_text(exc: ModelHTTPError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        return str(error)
    return "" if body is None else str(body)
