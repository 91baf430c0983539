"""`FallbackChain`: a role's models tried in order, the next one after a provider error.

pydantic-ai's `FallbackModel` does the trying. Each model of the chain is its own `MeteredModel`,
so every attempt is metered and reported under the name of the model that made it: the task's
`model_call` events say which model failed and which one answered.

A model moves the chain on when it gives up with a provider error: `ProviderUnavailable` (its
retries are spent; `max_attempts = 1` makes it move on at the first failure) or `ProviderRejected`
(the provider refused: a bad key, an unknown model, a full context window; another provider may
still serve the request). A missing API key (`ModelNotConfigured`) does not: the task names models
its workers must be able to call, and that is reported as `env.credentials`. When every model
failed, the last model's error is raised, so the step fails with that error's class as a lone
model's would, not with pydantic-ai's exception group.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic_ai import RunContext
from pydantic_ai.exceptions import FallbackExceptionGroup
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.settings import ModelSettings

from agents.errors import ProviderRejected, ProviderUnavailable
from agents.models.metered import MeteredModel

FALLBACK_ON = (ProviderUnavailable, ProviderRejected)


class FallbackChain(FallbackModel):
    """`models[0]`, then each later one in turn after a provider error of the one before."""

    def __init__(self, first: MeteredModel, *rest: MeteredModel) -> None:
        super().__init__(first, *rest, fallback_on=FALLBACK_ON)
        self.names = [first.name, *(model.name for model in rest)]
        self.spend = first.spend
        """What the chain's requests cost (its models share one `Spend`, see `build_model`)."""

    def __repr__(self) -> str:
        return f"FallbackChain({self.names!r})"

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        try:
            return await super().request(messages, model_settings, model_request_parameters)
        except FallbackExceptionGroup as group:
            raise _last(group) from None

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[object] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        try:
            async with super().request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as stream:
                yield stream
        except FallbackExceptionGroup as group:
            raise _last(group) from None


def _last(group: FallbackExceptionGroup) -> Exception:
    """The error of the last model tried (already redacted and classed by its `MeteredModel`)."""
    errors = [exc for exc in group.exceptions if isinstance(exc, Exception)]
    return errors[-1] if errors else group
