"""The message contract: envelopes round-trip as JSON and bad input is named precisely."""

import json

import pytest

from bus.envelope import Envelope, parse_envelope
from bus.errors import MalformedMessage, UnsupportedSchemaVersion
from bus.messages import PAYLOAD_BY_KIND, SCHEMA_VERSION, Plan, PlanStep, TaskSubmitted, json_schemas


def test_envelope_round_trips_through_json_with_its_typed_payload() -> None:
    """DESIGN.md bus contract: JSON on the wire, the kind names the payload model."""
    sent = Envelope.wrap(TaskSubmitted(text="fix the bug", repo="/r", mode="write"), task_id="t1")
    received = parse_envelope(sent.to_bytes())
    assert received == sent
    assert received.open() == TaskSubmitted(text="fix the bug", repo="/r", mode="write")


def test_reply_keeps_task_and_trace_and_points_at_its_cause() -> None:
    """Our contract: causation links a reply to the message it answers; the trace spans the task."""
    request = Envelope.wrap(TaskSubmitted(text="t", repo="/r"), task_id="t1")
    reply = request.reply(Plan(steps=[PlanStep(description="read")]))
    assert (reply.task_id, reply.trace_id, reply.causation_id) == ("t1", request.trace_id, request.id)
    assert reply.id != request.id and reply.kind == "plan"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"kind": "plan"}', "task_id"),
        (json.dumps({"kind": "nope", "task_id": "t", "payload": {}}).encode(), "unknown message kind"),
        (json.dumps({"kind": "task_submitted", "task_id": "t", "payload": {"text": ""}}).encode(), "invalid"),
    ],
)
def test_malformed_bytes_raise_malformed_message_saying_what_is_wrong(data: bytes, fragment: str) -> None:
    """Issue 2: a malformed message goes to dead-letter with a reason, so the reason must be specific."""
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
    assert set(schemas["payloads"]) == set(PAYLOAD_BY_KIND)
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
