"""A running `codeloop serve` counts known tasks in its Prometheus metrics, and `codeloop trace`
shows each finished task's roles and tool calls (text and JSON), as `codeloop watch` does, one
line each."""

import json
import urllib.request
from collections import Counter
from pathlib import Path

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agents.client import submit_task, watch_task
from agents.messages import ModelNames, TaskResult, TaskSubmitted
from agents.workspace import capture_snapshot
from bus.connection import open_bus
from codeloop.cli.trace import read_task_events
from codeloop.config.serve_note import client_bus_config
from codeloop.testing import make_repo
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve
from tests.e2e.conftest import model
from tests.support.repos import CALC

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _samples(url: str) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _total(samples: dict, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items())


async def test_serve_metrics_count_known_tasks_and_trace_shows_their_calls(tmp_path: Path) -> None:
    """Two known tasks (a fix, a diagnosis) through a real `codeloop serve`: its /metrics counts
    them by status, and counts exactly the model calls, tool calls and steps their events show."""
    home = tmp_path / "home"
    repo = make_repo(tmp_path / "repo", CALC)
    async with running_serve(home, "--pipeline", "auto", "--no-mcp") as (_process, note):
        url = note["metrics_url"]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        assert json.loads((home / "serve.json").read_text())["metrics_url"] == url
        config = client_bus_config(state_dir=home)
        async with open_bus(config) as bus:
            snapshot = await capture_snapshot(bus, repo)
            tasks = [
                TaskSubmitted(
                    text="add(2, 3) returns -1 instead of 5",
                    repo=str(repo),
                    mode="write",
                    models=ModelNames(default=model("fix")),
                    snapshot=snapshot,
                ),
                TaskSubmitted(
                    text="why does add(2, 3) return -1?", repo=str(repo), mode="write", snapshot=snapshot
                ),
            ]
            results = []
            for task in tasks:
                envelope, _ = await submit_task(bus, task)
                with anyio.fail_after(240):
                    final = await watch_task(bus, envelope.task_id, lambda e: None)
                results.append(TaskResult.model_validate(final.payload))
            assert [r.status for r in results] == ["done", "diagnosed"], results[0].report
            events = [e for r in results for e in await read_task_events(bus, r.task_id)]
        payloads = [e.payload for e in events if e.kind == "event"]
        model_calls = Counter(p["data"]["role"] for p in payloads if p["name"] == "model_call")
        tool_calls = [p["data"] for p in payloads if p["name"] == "tool_call"]
        steps = [p for p in payloads if p["name"] == "transition" and p["data"].get("step_id")]
        with anyio.fail_after(30):
            # The serve's subscriber counts the result events on its own time; an HTTP endpoint
            # offers nothing to wait on but another look.
            while _total(samples := _samples(url), "codeloop_tasks_total") < 2:  # noqa: ASYNC110
                await anyio.sleep(0.2)
        assert _total(samples, "codeloop_tasks_total", status="done") == 1
        assert _total(samples, "codeloop_tasks_total", status="diagnosed") == 1
        for role in ("planner", "coder"):
            assert _total(samples, "codeloop_model_requests_total", role=role) == model_calls[role] >= 1
        assert _total(samples, "codeloop_model_tokens_total") > 0
        assert _total(samples, "codeloop_tool_calls_total") == len(tool_calls) > 0
        for call in tool_calls:
            assert _total(samples, "codeloop_tool_calls_total", role=call["role"], tool=call["tool"]) >= 1
        assert _total(samples, "codeloop_steps_total") == len(steps)
        assert _total(samples, "codeloop_step_seconds_count", role="verifier") == 2
        assert _total(samples, "codeloop_messages_settled_total", role="coder", outcome="acked") == 1

        fixed = results[0]
        text = (
            await anyio.run_process([*CODELOOP, "trace", fixed.task_id], env=codeloop_env(home))
        ).stdout.decode()
        for role in ("planner", "retriever", "coder", "verifier"):
            assert role in text
        own = [
            e.payload["data"]
            for e in events
            if e.task_id == fixed.task_id and e.kind == "event" and e.payload["name"] == "tool_call"
        ]
        for call in own:
            assert f"tool {call['server']}.{call['tool']} {call['outcome']}" in text
        out = (
            await anyio.run_process([*CODELOOP, "trace", fixed.task_id, "--json"], env=codeloop_env(home))
        ).stdout
        timeline = json.loads(out)
        assert timeline["status"] == "done" and timeline["trace_id"] == fixed.trace_id
        assert set(timeline["roles"]) == {"planner", "retriever", "coder", "verifier"}
        shown = [(s["role"], t["server"], t["tool"]) for s in timeline["steps"] for t in s["tool_calls"]]
        assert sorted(shown) == sorted((c["role"], c["server"], c["tool"]) for c in own)
        assert all(
            t["duration_ms"] >= 0 and t["outcome"] == "ok" for s in timeline["steps"] for t in s["tool_calls"]
        )
        coder = next(s for s in timeline["steps"] if s["role"] == "coder")
        assert coder["model_calls"] and all(m["input_tokens"] > 0 for m in coder["model_calls"])
        watched = (
            await anyio.run_process([*CODELOOP, "watch", fixed.task_id], env=codeloop_env(home))
        ).stdout.decode()
        assert any(
            line.split()[1:4] == ["coder", "tool", "fs.write_file"]
            and "chars" in line
            and "a + b" not in line
            for line in watched.splitlines()
        ), watched
        missing = await anyio.run_process(
            [*CODELOOP, "trace", "no-such-task"], env=codeloop_env(home), check=False
        )
        assert missing.returncode == 1 and b"error: no task no-such-task" in missing.stderr
