"""Per-model settings, configured prices and fallback lists, through a real pydantic-ai `Agent`
over scripted `FunctionModel`s (the one stand-in allowed: the LLM's decisions)."""

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from agents.errors import ProviderUnavailable
from agents.messages import ModelNames, ModelOptions
from agents.models.adapter import FallbackChain, MeteredModel, ModelCall, RetryPolicy, build_model

pytestmark = pytest.mark.anyio
NO_WAIT = RetryPolicy(base_delay_s=0, jitter=0)


def _answers(text: str, seen: list[dict] | None = None):
    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if seen is not None:
            seen.append(dict(info.model_settings or {}))
        return ModelResponse(
            parts=[TextPart(text)], usage=RequestUsage(input_tokens=2_000, output_tokens=500)
        )

    return script


def _down(calls: list[int]):
    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        raise ModelHTTPError(500, "down-model", {"error": {"message": "upstream exploded"}})

    return script


async def test_configured_settings_reach_the_model_and_the_configured_price_meters_the_call() -> None:
    """Our configuration: temperature and max tokens per model; a price for a model genai-prices
    does not know (a scripted one here) makes its calls cost what the file says."""
    seen: list[dict] = []
    calls: list[ModelCall] = []
    options = ModelOptions(temperature=0.1, max_tokens=321, input_usd_per_mtok=3.0, output_usd_per_mtok=15.0)
    model = MeteredModel(
        FunctionModel(_answers("ok", seen)),
        name="function:s.py:a",
        role="coder",
        on_call=calls.append,
        options=options,
    )
    with anyio.fail_after(10):
        await Agent(model).run("hi")
    assert seen[0]["temperature"] == 0.1 and seen[0]["max_tokens"] == 321
    assert calls[0].cost_usd == pytest.approx(2_000 * 3.0 / 1e6 + 500 * 15.0 / 1e6)
    unpriced = MeteredModel(
        FunctionModel(_answers("ok")), name="function:s.py:b", role="coder", on_call=calls.append
    )
    with anyio.fail_after(10):
        await Agent(unpriced).run("hi")
    assert calls[-1].cost_usd is None


async def test_a_fallback_list_answers_with_the_next_model_after_a_provider_error() -> None:
    """Our configuration: a role's list is tried in order on provider errors; each model is
    metered under its own name, so the calls say which one failed and which one answered."""
    down: list[int] = []
    calls: list[ModelCall] = []
    chain = FallbackChain(
        MeteredModel(
            FunctionModel(_down(down)),
            name="first",
            role="planner",
            on_call=calls.append,
            retry=NO_WAIT.model_copy(update={"max_attempts": 2}),
        ),
        MeteredModel(
            FunctionModel(_answers("from the second")), name="second", role="planner", on_call=calls.append
        ),
    )
    with anyio.fail_after(10):
        result = await Agent(chain).run("hi")
    assert result.output == "from the second"
    assert len(down) == 2  # its own retries first, then the next model
    assert [(c.model, c.outcome, c.attempts) for c in calls] == [
        ("first", "unavailable", 2),
        ("second", "ok", 1),
    ]


async def test_when_every_model_fails_the_last_error_is_raised_with_its_failure_class() -> None:
    """Our choice: a step whose models all failed fails like one model would (env.infra), not with
    pydantic-ai's exception group that the roles could not class."""
    down: list[int] = []
    chain = FallbackChain(
        MeteredModel(
            FunctionModel(_down(down)),
            name="a",
            role="coder",
            retry=NO_WAIT.model_copy(update={"max_attempts": 1}),
        ),
        MeteredModel(
            FunctionModel(_down(down)),
            name="b",
            role="coder",
            retry=NO_WAIT.model_copy(update={"max_attempts": 1}),
        ),
    )
    with anyio.fail_after(10), pytest.raises(ProviderUnavailable) as raised:
        await Agent(chain).run("hi")
    assert "model b unavailable" in str(raised.value) and raised.value.failure_class == "env.infra"
    assert len(down) == 2


def test_a_task_s_chain_becomes_metered_models_with_their_own_attempts(tmp_path) -> None:
    """Our wire contract: `ModelNames` carries fallbacks per role and options per model; the
    model adapter builds one metered model per name with the attempts its options set."""
    script = tmp_path / "s.py"
    script.write_text("def answer(messages, info):\n    raise NotImplementedError\n")
    first, second = f"function:{script}:answer", "openai-chat:gpt-4o"
    names = ModelNames(
        coder=first, fallbacks={"coder": [second]}, options={first: ModelOptions(max_attempts=1)}
    )
    assert names.chain_for("planner") is None and names.chain_for("coder").names == [first, second]  # pyright: ignore[reportOptionalMemberAccess] - the coder has a model here: the test set it
    model = build_model(names.chain_for("coder"), role="coder")  # pyright: ignore[reportArgumentType] - the coder has a model here: the test set it
    assert isinstance(model, FallbackChain) and model.names == [first, second]
    assert [m.retry.max_attempts for m in model.models] == [1, 4]  # type: ignore[attr-defined] - the built model is a FallbackModel of RetryModels here
    assert isinstance(build_model(ModelNames(default=first).chain_for("coder"), role="coder"), MeteredModel)  # pyright: ignore[reportArgumentType] - the coder has a model here: the test set it
