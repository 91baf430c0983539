"""The versioned envelope every bus message travels in; JSON on the wire.

An envelope is read open-world at the top (unknown *envelope* fields from a newer peer are
ignored) but its payload is validated closed against the model registered for its `kind`.
"""

import json
import uuid
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bus.errors import MalformedMessage, UnsupportedSchemaVersion
from bus.messages import SCHEMA_VERSION, Message, payload_model, registered_kinds


def new_id() -> str:
    return uuid.uuid4().hex


class Envelope(BaseModel):
    """What every bus message travels in: routing and tracing fields around one typed payload.

    Readers ignore envelope fields they do not know (a newer peer may add some) but validate
    `payload` closed against the model registered for `kind`."""

    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)

    id: str = Field(default_factory=new_id, min_length=1)
    """Unique message id; JetStream deduplicates on it (`Nats-Msg-Id`) and handlers are idempotent on it."""
    kind: str
    """The payload's kind, e.g. `task_submitted`: the key of its schema under `payloads`."""
    task_id: str = Field(min_length=1)
    """The task this message belongs to; also the `<task_id>` token of its subjects, such as
    `codeloop.events.<task_id>.<name>`."""
    trace_id: str = Field(default_factory=new_id)
    """Shared by every message of one task; also the OpenTelemetry trace id."""
    causation_id: str | None = None
    """Id of the message this one answers or was caused by."""
    sent_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the sender built the envelope, ISO 8601 with a UTC offset, by the sender's clock
    (timelines and `codeloop watch` show it)."""
    schema_version: int = SCHEMA_VERSION
    """The wire version (`schema_version` at the top of `codeloop schema`); a reader dead-letters
    envelopes of any other version as `unsupported_schema_version`."""
    payload: dict[str, Any]
    """The message itself, a JSON object valid against the schema of `kind`."""

    @classmethod
    def wrap(
        cls,
        payload: Message,
        *,
        task_id: str,
        trace_id: str | None = None,
        causation_id: str | None = None,
        id: str | None = None,
    ) -> "Envelope":
        kind = str(payload.kind)  # type: ignore[attr-defined] - every registered payload model declares its kind field
        return cls(
            payload=payload.model_dump(mode="json"),
            kind=kind,
            task_id=task_id,
            causation_id=causation_id,
            # Not given: what the fields' own defaults would make.
            trace_id=trace_id if trace_id is not None else new_id(),
            id=id if id is not None else new_id(),
        )

    def reply(self, payload: Message, *, id: str | None = None) -> "Envelope":
        """An envelope for `payload` in the same task and trace, caused by this one."""
        return Envelope.wrap(
            payload, task_id=self.task_id, trace_id=self.trace_id, causation_id=self.id, id=id
        )

    def open(self) -> Message:
        """The typed payload.

        Raises:
            MalformedMessage: the kind is unknown or the payload does not fit its model.
        """
        model = payload_model(self.kind)
        if model is None:
            raise MalformedMessage(f"unknown message kind {self.kind!r}; known: {registered_kinds()}")
        try:
            return model.model_validate(self.payload)
        except ValidationError as exc:
            raise MalformedMessage(f"payload of kind {self.kind!r} is invalid: {exc}") from exc

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()


def parse_envelope(data: bytes) -> Envelope:
    """Read an envelope from the wire and check its payload.

    Raises:
        UnsupportedSchemaVersion: a schema version other than ours.
        MalformedMessage: not JSON, missing fields, unknown kind or an invalid payload.
    """
    # The version is checked before the fields: a newer peer may have changed them.
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise MalformedMessage(f"an envelope is a JSON object, got {type(raw).__name__}")
    version = cast(dict[str, Any], raw).get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise UnsupportedSchemaVersion(version, SCHEMA_VERSION)
    try:
        envelope = Envelope.model_validate(raw)
    except ValidationError as exc:
        raise MalformedMessage(f"not a codeloop envelope: {exc.errors(include_url=False)[:3]}") from exc
    envelope.open()
    return envelope
