"""The message contract: envelopes round-trip as JSON and bad input is named precisely."""

import json

import pytest

from agents.messages import Plan, PlanResult, PlanStep, TaskSubmitted
from bus.envelope import Envelope, parse_envelope
from bus.errors import MalformedMessage, UnsupportedSchemaVersion
from bus.messages import (
    SCHEMA_VERSION,
    DuplicateKind,
    Message,
    json_schemas,
    register_payloads,
    registered_kinds,
)


def test_envelope_round_trips_through_json_with_its_typed_payload() -> None:
    """docs/bus-contract.md, "The envelope": JSON on the wire, the kind names the payload model."""
    sent = Envelope.wrap(TaskSubmitted(text="fix the bug", repo="/r", mode="write"), task_id="t1")
    received = parse_envelope(sent.to_bytes())
    assert received == sent
    assert received.open() == TaskSubmitted(text="fix the bug", repo="/r", mode="write")


def test_reply_keeps_task_and_trace_and_points_at_its_cause() -> None:
    """Our contract: causation links a reply to the message it answers; the trace spans the task."""
    request = Envelope.wrap(TaskSubmitted(text="t", repo="/r"), task_id="t1")
    reply = request.reply(PlanResult(step_id="01-plan", plan=Plan(steps=[PlanStep(description="read")])))
    assert (reply.task_id, reply.trace_id, reply.causation_id) == ("t1", request.trace_id, request.id)
    assert reply.id != request.id and reply.kind == "plan_result"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"kind": "plan_result"}', "task_id"),
        (json.dumps({"kind": "nope", "task_id": "t", "payload": {}}).encode(), "unknown message kind"),
        (json.dumps({"kind": "task_submitted", "task_id": "t", "payload": {"text": ""}}).encode(), "invalid"),
    ],
)
def test_malformed_bytes_raise_malformed_message_saying_what_is_wrong(data: bytes, fragment: str) -> None:
    """A malformed message goes to dead-letter with a reason, so the reason must be specific."""
    with pytest.raises(MalformedMessage) as caught:
        parse_envelope(data)
    assert fragment in str(caught.value)
    assert not isinstance(caught.value, UnsupportedSchemaVersion)


def test_other_schema_version_is_reported_as_such_even_if_fields_changed() -> None:
    """A newer peer may change fields; the version is the reason we give, not the field mismatch."""
    data = json.dumps({"schema_version": SCHEMA_VERSION + 1, "kind": "whatever"}).encode()
    with pytest.raises(UnsupportedSchemaVersion) as caught:
        parse_envelope(data)
    assert caught.value.version == SCHEMA_VERSION + 1


def test_exported_schemas_cover_the_envelope_and_every_payload() -> None:
    """`codeloop schema` is how agents in other languages join: every kind must be described."""
    schemas = json_schemas()
    assert set(schemas["payloads"]) == set(registered_kinds())
    assert {"task_submitted", "code_request", "verify_result", "task_result", "event"} <= set(
        schemas["payloads"]
    )
    assert {
        "id",
        "kind",
        "task_id",
        "trace_id",
        "causation_id",
        "sent_at",
        "schema_version",
        "payload",
    } <= set(schemas["envelope"]["properties"])
    assert schemas["payloads"]["task_submitted"]["properties"]["mode"]["enum"] == ["read", "write", "execute"]


def test_a_custom_role_registers_its_payloads_and_envelopes_open_them() -> None:
    """The registry is open: a payload registered outside the bus travels like the bus's own."""
    from typing import Literal

    class Review(Message):
        kind: Literal["test_review"] = "test_review"
        verdict: str

    register_payloads(Review)
    register_payloads(Review)  # idempotent for the same model
    sent = Envelope.wrap(Review(verdict="ok"), task_id="t1")
    assert parse_envelope(sent.to_bytes()).open() == Review(verdict="ok")

    class Impostor(Message):
        kind: Literal["test_review"] = "test_review"

    with pytest.raises(DuplicateKind, match="test_review"):
        register_payloads(Impostor)
