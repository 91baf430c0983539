"""Provider errors against a real OpenAI-compatible HTTP server: retried, classed, never leaking the key."""

import logging
import secrets

import anyio
import pytest
from pydantic_ai import Agent

from agents.errors import ProviderRejected, ProviderUnavailable
from agents.models.adapter import ModelCall, RetryPolicy, build_model
from tests.agents.fake_llm import Reply, error, serve_fake_llm

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.05)


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = f"sk-test-{secrets.token_hex(16)}"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    return key


async def _run(
    base_url: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    retry: RetryPolicy = FAST,
    name: str = "openai-chat:gpt-4o",
):
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    calls: list[ModelCall] = []
    agent = Agent(build_model(name, role="planner", on_call=calls.append, retry=retry))
    with anyio.fail_after(20):
        try:
            result = await agent.run("say hello")
        except Exception as exc:
            return exc, calls
    return result, calls


async def test_rate_limited_twice_then_answered_succeeds_after_retries(api_key: str, monkeypatch) -> None:
    """Our design: a 429 is infrastructure, retried with back-off; the third attempt's answer is the result."""
    limited = Reply(429, headers={"retry-after-ms": "5"}, body=error(429, "Rate limit reached"))
    async with serve_fake_llm(limited, limited, Reply(text="hello after waiting")) as fake:
        result, calls = await _run(fake.base_url, monkeypatch)
    assert not isinstance(result, Exception), result
    assert result.output == "hello after waiting"
    assert len(fake.requests) == 3
    [call] = calls
    assert (call.outcome, call.attempts, call.input_tokens, call.output_tokens) == ("ok", 3, 11, 7)
    assert call.backoff_s == pytest.approx(0.010)  # Retry-After (5 ms) honoured twice, not our own back-off


async def test_server_error_every_time_raises_provider_unavailable_as_infrastructure(
    api_key: str, monkeypatch
) -> None:
    """Our design: 5xx retried up to the policy's attempts, then ProviderUnavailable with env.infra."""
    async with serve_fake_llm(Reply(500, body=error(500, "internal error"))) as fake:
        raised, calls = await _run(fake.base_url, monkeypatch)
    assert isinstance(raised, ProviderUnavailable)
    assert raised.failure_class == "env.infra"
    assert (raised.attempts, raised.status_code) == (3, 500)
    assert len(fake.requests) == 3
    assert [(c.outcome, c.attempts, c.failure_class) for c in calls] == [("unavailable", 3, "env.infra")]


async def test_retry_after_longer_than_the_policy_allows_gives_up_at_once(api_key: str, monkeypatch) -> None:
    """Our choice: a provider asking to wait past max_delay_s is unavailable now, not after a long block."""
    async with serve_fake_llm(
        Reply(429, headers={"retry-after": "120"}, body=error(429, "slow down"))
    ) as fake:
        raised, _ = await _run(fake.base_url, monkeypatch)
    assert isinstance(raised, ProviderUnavailable)
    assert "120" in str(raised) and len(fake.requests) == 1


async def test_unauthorized_raises_provider_rejected_without_retrying(api_key: str, monkeypatch) -> None:
    """Our design: a 401 is a set-up problem (bad key), retrying cannot help: one request, env.setup."""
    async with serve_fake_llm(Reply(401, body=error(401, "Incorrect API key provided"))) as fake:
        raised, calls = await _run(fake.base_url, monkeypatch)
    assert isinstance(raised, ProviderRejected)
    assert (raised.failure_class, raised.reason, raised.status_code) == ("env.setup", "auth", 401)
    assert len(fake.requests) == 1
    assert [c.outcome for c in calls] == ["rejected"]


async def test_planted_api_key_appears_in_no_log_line_error_or_model_call(
    api_key: str, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Our security rule: secrets never reach logs or events, even when the provider echoes the key back."""
    echoed = error(401, f"Incorrect API key provided: {api_key}")
    async with serve_fake_llm(
        Reply(500, body=error(500, f"upstream said Bearer {api_key}")), Reply(401, body=echoed)
    ) as fake:
        with caplog.at_level(logging.DEBUG):
            raised, calls = await _run(fake.base_url, monkeypatch)
    assert fake.requests[0]["authorization"] == f"Bearer {api_key}"  # the key was really sent and echoed
    assert isinstance(raised, ProviderRejected)
    lines = [record.getMessage() for record in caplog.records]
    assert any("model call" in line for line in lines)
    assert all(api_key not in line for line in lines)
    assert api_key not in str(raised)
    assert all(api_key not in call.model_dump_json() for call in calls)


async def test_known_model_reports_tokens_and_a_price(api_key: str, monkeypatch, caplog) -> None:
    """Issue contract: every call logged with role, model, tokens in/out, latency and cost where prices are known."""
    async with serve_fake_llm(Reply(text="priced")) as fake:
        with caplog.at_level(logging.INFO, logger="codeloop.agents"):
            result, calls = await _run(fake.base_url, monkeypatch)
    assert result.output == "priced"  # pyright: ignore[reportAttributeAccessIssue] - the exception group's leaf is the provider's result error, which has output
    [call] = calls
    assert call.cost_usd is not None and call.cost_usd > 0
    [line] = [r.getMessage() for r in caplog.records if r.name == "codeloop.agents"]
    assert "role=planner" in line and "model=openai-chat:gpt-4o" in line and "in=11 out=7" in line


async def test_ollama_names_reach_the_server_at_ollama_base_url(monkeypatch) -> None:
    """Issue contract: `ollama:` models talk Chat Completions at OLLAMA_BASE_URL, no API key needed."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with serve_fake_llm(Reply(text="local answer")) as fake:
        monkeypatch.setenv("OLLAMA_BASE_URL", fake.base_url)
        calls: list[ModelCall] = []
        agent = Agent(build_model("ollama:llama3", role="coder", on_call=calls.append, retry=FAST))
        with anyio.fail_after(20):
            result = await agent.run("hi")
    assert result.output == "local answer"
    assert [(c.role, c.model, c.cost_usd) for c in calls] == [("coder", "ollama:llama3", None)]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            Reply(429, body={"error": {"message": "You exceeded your quota", "code": "insufficient_quota"}}),
            "quota",
        ),
        (Reply(404, body={"error": {"message": "no such model", "code": "model_not_found"}}), "not_found"),
        (Reply(400, body=error(400, "tools[0] is malformed")), "bad_request"),
    ],
)
async def test_refusals_are_not_retried_and_say_why(
    api_key: str, monkeypatch, reply: Reply, reason: str
) -> None:
    """Our design: an exhausted quota is a 429 that waiting cannot fix; it is refused like a 404 or 400."""
    async with serve_fake_llm(reply) as fake:
        raised, _ = await _run(fake.base_url, monkeypatch)
    assert isinstance(raised, ProviderRejected)
    assert (raised.reason, raised.failure_class) == (reason, "env.setup")
    assert len(fake.requests) == 1


async def test_nothing_listening_is_retried_then_unavailable(api_key: str, monkeypatch) -> None:
    """Our design: a refused connection is infrastructure, retried like a 5xx."""
    async with serve_fake_llm() as fake:
        closed_url = fake.base_url  # the server stops when the block ends; its port then refuses
    raised, calls = await _run(closed_url, monkeypatch)
    assert isinstance(raised, ProviderUnavailable)
    assert (raised.attempts, raised.status_code, raised.failure_class) == (3, None, "env.infra")
    assert [c.outcome for c in calls] == ["unavailable"]
