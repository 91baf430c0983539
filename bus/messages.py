"""The bus's own payloads and the registry every payload kind is looked up in.

`bus/` owns the envelope (`bus/envelope.py`), the `Event` and `DeadLetter` payloads and this
registry; everything else that travels — tasks, plans, patches, reports — is defined by the
package that owns it and registered here (`register_payloads`), as `agents/messages/` does for
the task's path and as a custom role does for its own messages. Each payload names itself with a
literal `kind`, which is also the envelope's `kind`, so a reader in any language can dispatch on
one string. Models are closed (`extra="forbid"`): we produce and version them together, so drift
fails loudly instead of being dropped. `codeloop schema` prints `json_schemas()`.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = 1
"""Bumped on any incompatible change of an envelope or payload."""


class Message(BaseModel):
    """Base of every payload: closed, frozen, field docstrings as JSON-schema descriptions."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Event(Message):
    """Something that happened to a task, on `codeloop.events.<task_id>.<name>`."""

    kind: Literal["event"] = "event"
    """Always `event`; equals the envelope's `kind`."""
    name: str
    """What happened: `transition`, `tool_call`, `model_call`, `handler_error`, `dead_letter`, ..."""
    message: str = ""
    """One line for a person."""
    data: dict[str, Any] = {}
    """Details for programs; never secrets, never whole file contents."""


class DeadLetter(Message):
    """A message that could not be handled, with the reason; published as an event, never silently dropped."""

    kind: Literal["dead_letter"] = "dead_letter"
    """Always `dead_letter`; equals the envelope's `kind`."""
    reason: Literal["malformed", "unsupported_schema_version", "max_deliveries", "handler_error"]
    """Why it was given up: unreadable, a schema version we do not speak, or still failing at the
    last allowed delivery (`max_deliveries`, `handler_error`)."""
    error: str
    """The error of the last attempt."""
    subject: str
    """The subject the message was published on."""
    data: str
    """The original message, decoded as UTF-8 with replacement, cut to 64 KiB."""
    deliveries: int = 1
    """How often it was delivered before it was given up."""


class DuplicateKind(ValueError):
    """Two different models registered under one `kind`."""


_REGISTRY: dict[str, type[Message]] = {}


def kind_of(model: type[Message]) -> str:
    """The literal `kind` a payload model declares."""
    field = model.model_fields.get("kind")
    if field is None or not isinstance(field.default, str):
        raise TypeError(f"{model.__name__} has no literal `kind` field with a default")
    return field.default


def register_payloads(*models: type[Message]) -> None:
    """Make `models` known to envelopes by their `kind`; registering the same model again is a no-op.

    Raises:
        DuplicateKind: another model already holds one of the kinds.
    """
    for model in models:
        kind = kind_of(model)
        known = _REGISTRY.get(kind)
        if known is not None and known is not model:
            raise DuplicateKind(f"kind {kind!r} is registered by {known.__qualname__} already")
        _REGISTRY[kind] = model


def payload_model(kind: str) -> type[Message] | None:
    """The model registered for `kind`, None when nobody registered it."""
    return _REGISTRY.get(kind)


def registered_kinds() -> list[str]:
    return sorted(_REGISTRY)


def json_schemas() -> dict[str, Any]:
    """JSON Schema of the envelope and of every registered payload, keyed by kind, for agents in
    other languages."""
    from bus.envelope import Envelope

    return {
        "schema_version": SCHEMA_VERSION,
        "envelope": Envelope.model_json_schema(),
        "payloads": {kind: _REGISTRY[kind].model_json_schema() for kind in registered_kinds()},
    }


register_payloads(Event, DeadLetter)
