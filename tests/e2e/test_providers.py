"""Provider failures are retried and classed as infrastructure, not as the model's fault; the
provider is a real HTTP server on loopback speaking OpenAI's API (it stands in for the LLM)."""

from pathlib import Path

import anyio
import pytest

from agents.client import watch_task
from agents.messages import ModelNames, TaskSubmitted
from codeloop.testing import make_repo
from tests.agents.fake_llm import Reply, error, serve_fake_llm
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
KEY = "sk-test-provider-key-0123456789abcdef"


async def _model_calls(pipeline, task_id: str) -> list[dict]:
    calls: list[dict] = []

    def on_event(envelope) -> None:
        if envelope.kind == "event" and envelope.payload["name"] == "model_call":
            calls.append(envelope.payload["data"])

    with anyio.move_on_after(2):
        await watch_task(pipeline.bus, task_id, on_event, until_final=False)
    return calls


async def test_a_provider_that_stays_down_fails_the_task_as_infrastructure(
    pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve_fake_llm(Reply(status=500, body=error(500, "upstream exploded"))) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        task = TaskSubmitted(
            text="fix add",
            repo=str(make_repo(tmp_path / "repo", CALC)),
            mode="write",
            models=ModelNames(default="openai-chat:gpt-4o"),
        )
        result = await pipeline(task)
    assert result.status == "failed" and result.failure_class == "env.infra", result.report
    assert len(fake.requests) == 4  # retried: four attempts, then given up
    calls = await _model_calls(pipeline, result.task_id)
    assert calls[-1]["attempts"] == 4 and calls[-1]["failure_class"] == "env.infra"
    assert KEY not in result.model_dump_json() and all(KEY not in str(c) for c in calls)


async def test_a_rate_limit_is_ridden_out_and_bad_output_is_the_models_fault(
    pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """429 twice then answers: the request succeeds after retries; the answer is no plan, which is
    a model failure (agent.format), not an infrastructure one."""
    limited = Reply(status=429, headers={"retry-after-ms": "20"}, body=error(429, "slow down"))
    async with serve_fake_llm(limited, limited, Reply(text="I will not make a plan")) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        task = TaskSubmitted(
            text="fix add",
            repo=str(make_repo(tmp_path / "repo", CALC)),
            mode="write",
            models=ModelNames(default="openai-chat:gpt-4o"),
        )
        result = await pipeline(task)
    assert result.status == "failed" and result.failure_class == "agent.format", result.report
    calls = await _model_calls(pipeline, result.task_id)
    assert calls[0]["attempts"] == 3 and calls[0]["outcome"] == "ok"


async def test_a_fallback_answers_after_a_500_and_a_worker_without_the_key_fails_as_credentials(
    pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configuration contract: a role's list is tried in order on provider errors, and the events
    say which model answered; a worker lacking a model's key fails the step `env.credentials`
    naming the variable (workers run a task's models, not their own)."""
    from agents.messages import ModelOptions
    from tests.e2e.conftest import model

    repo = make_repo(tmp_path / "repo", CALC)
    first, second = "openai-chat:gpt-4o", model("explain")
    async with serve_fake_llm(Reply(status=500, body=error(500, "upstream exploded"))) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        names = ModelNames(
            default=first, fallbacks={"default": [second]}, options={first: ModelOptions(max_attempts=1)}
        )
        result = await pipeline(
            TaskSubmitted(text="what does add do?", repo=str(repo), mode="read", models=names)
        )
    assert result.status == "done", result.report
    calls = await _model_calls(pipeline, result.task_id)
    planner = [(c["model"], c["outcome"]) for c in calls if c["role"] == "planner"]
    assert planner == [(first, "unavailable"), (second, "ok")]
    assert {c["model"] for c in calls if c["outcome"] == "ok"} == {second}
    assert len(fake.requests) == len(
        [c for c in calls if c["model"] == first]
    )  # one attempt each: max_attempts = 1

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    missing = await pipeline(
        TaskSubmitted(
            text="what does add do?",
            repo=str(repo),
            mode="read",
            models=ModelNames(default="anthropic:claude-sonnet-4-5"),
        )
    )
    assert (missing.status, missing.failure_class) == ("failed", "env.credentials"), missing.report
    assert "ANTHROPIC_API_KEY" in missing.report
