"""The pieces under the events and the trace: what an event may carry, and how a timeline is
assembled from a task's events."""

import hashlib
import json
from datetime import UTC, datetime, timedelta

from agents.observe.events import cap
from agents.observe.tool_events import outcome_of_error, summarize_arguments
from bus.envelope import Envelope
from bus.messages import Event
from codeloop.observe.render import event_line
from codeloop.observe.timeline import build_timeline


def test_contents_and_long_arguments_become_size_and_sha256_and_secrets_are_masked() -> None:
    """Tool-call events never carry file contents or patches (only their size and digest) nor a
    secret-named argument; an ordinary budget argument is shown as it is."""
    content = "print('hello')\n"
    shown = summarize_arguments(
        {"path": "a.py", "content": content, "query": "x" * 5000, "api_token": "abc", "token_budget": 400}
    )
    assert shown["content"] == {"chars": len(content), "sha256": hashlib.sha256(content.encode()).hexdigest()}
    query = shown["query"]
    assert isinstance(query, dict) and query["chars"] == 5000 and "x" * 10 not in json.dumps(shown)
    assert shown["api_token"] == "[redacted]" and shown["token_budget"] == 400 and shown["path"] == "a.py"


def test_capped_event_data_stays_small_whatever_it_is_given() -> None:
    """NATS caps a message at 1 MiB: a huge string, a long list and deep nesting all come out small."""
    deep: dict = {}
    node = deep
    for _ in range(50):
        node["next"] = {}
        node = node["next"]
    data = cap({"big": "y" * 2_000_000, "many": list(range(10_000)), "deep": deep, "key": "sk-" + "a" * 30})
    text = json.dumps(data)
    assert len(text) < 4000 and "[2000000 chars]" in text and "sk-aaaa" not in text


def test_a_refusal_is_told_from_an_error_by_the_servers_error_type() -> None:
    """`refused` is the server saying no (scope, confinement, a person); other failures are `error`."""
    assert outcome_of_error('{"type":"permission_denied","message":"no"}') == ("refused", "permission_denied")
    assert outcome_of_error('{"type":"conflict"}') == ("error", "conflict")
    assert outcome_of_error("boom") == ("error", None)


def _env(at: datetime, name: str, data: dict, message: str = "") -> Envelope:
    envelope = Envelope.wrap(Event(name=name, message=message, data=data), task_id="t1", trace_id="tr")
    return envelope.model_copy(update={"sent_at": at})


def test_a_timeline_puts_each_call_under_its_step_and_times_steps_by_transitions() -> None:
    """Calls go to the step they name, the orchestrator's notes to the step they conclude, and a
    revised plan is listed with its reason."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    s = timedelta(seconds=1)
    plan = {"steps": [{"description": "fix"}], "revision_reason": None}
    envelopes = [
        _env(
            t0, "transition", {"status": "planning", "stage": "plan", "role": "planner", "step_id": "01-plan"}
        ),
        _env(
            t0 + s,
            "model_call",
            {
                "role": "planner",
                "step_id": "01-plan",
                "model": "m",
                "outcome": "ok",
                "input_tokens": 10,
                "output_tokens": 5,
                "latency_s": 0.5,
            },
        ),
        _env(t0 + 2 * s, "plan", {"plan": plan}),
        _env(
            t0 + 2 * s,
            "transition",
            {"status": "coding", "stage": "code", "role": "coder", "step_id": "02-code"},
        ),
        _env(
            t0 + 3 * s,
            "tool_call",
            {
                "role": "coder",
                "step_id": "02-code",
                "server": "fs",
                "tool": "read_file",
                "outcome": "ok",
                "duration_ms": 12.0,
            },
        ),
        _env(
            t0 + 4 * s,
            "transition",
            {"status": "planning", "stage": "plan", "role": "planner", "step_id": "03-plan"},
        ),
        _env(t0 + 5 * s, "plan", {"plan": {**plan, "revision_reason": "tests still fail"}}),
        _env(t0 + 6 * s, "transition", {"status": "done", "failure_class": None}),
    ]
    timeline = build_timeline("t1", envelopes)
    assert [(st.step_id, st.role, st.duration_s) for st in timeline.steps] == [
        ("01-plan", "planner", 2.0),
        ("02-code", "coder", 2.0),
        ("03-plan", "planner", 2.0),
    ]
    assert timeline.steps[0].model_calls[0].input_tokens == 10 and timeline.steps[0].notes[0].name == "plan"
    assert timeline.steps[1].tool_calls[0].tool == "read_file"
    assert [p.reason for p in timeline.plans] == [None, "tests still fail"]
    assert timeline.status == "done" and timeline.duration_s == 6.0 and timeline.roles["planner"].steps == 2
    assert event_line(envelopes[4]).split()[1:4] == ["coder", "tool", "fs.read_file"]
