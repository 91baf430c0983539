"""Small events on a task's stream, with the trace id, step and role of whoever published them.

Which step is running is a context variable (`current_step`), set by `bind_step` around a role's
handler from the request it received, so everything the handler does — model calls, tool calls —
can say which step it belongs to without the roles passing it down.

Events stay small: a NATS message is capped at 1 MiB and a task's stream holds hundreds of them,
so every string is cut (`cap`), lists are shortened, and text that could hold a secret goes
through `_redact` first. A failed publish never fails the work it describes.
"""

import contextvars
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, overload

from pydantic import JsonValue

from agents.models._redact import _redact as _model_redact
from agents.runtime.environments import collecting, stamp
from bus import subjects
from bus.actor import ActorSpec, Delivery
from bus.connection import Bus
from bus.envelope import Envelope
from bus.errors import BusError
from bus.messages import Event

log = logging.getLogger("codeloop.agents")

MAX_STRING = 500
"""Longest string in an event's data; longer ones are cut with their size noted."""
MAX_ITEMS = 50
"""Longest list (and most keys of a mapping) in an event's data."""
MAX_DEPTH = 6


def _redact(text: str) -> str:
    """The one place these events redact text: the project's redaction rule, as the model adapter
    applies it."""
    return _model_redact(text)


@dataclass(frozen=True)
class StepInfo:
    """The step a piece of work belongs to."""

    task_id: str
    role: str
    step_id: str | None = None
    trace_id: str | None = None


current_step: contextvars.ContextVar[StepInfo | None] = contextvars.ContextVar(
    "codeloop_current_step", default=None
)


def bind_step(spec: ActorSpec) -> ActorSpec:
    """`spec` whose handler runs with `current_step` set from the delivery (the request's
    `step_id`, the envelope's task and trace id, the worker's role), and whose verification
    report names the project environment its test runs used (`agents.runtime.environments`)."""
    handler = spec.handler

    async def bound(delivery: Delivery) -> object:
        envelope = delivery.envelope
        step_id = envelope.payload.get("step_id") if isinstance(envelope.payload, dict) else None
        info = StepInfo(
            task_id=envelope.task_id,
            role=delivery.role,
            step_id=step_id if isinstance(step_id, str) else None,
            trace_id=envelope.trace_id,
        )
        token = current_step.set(info)
        try:
            with collecting() as environments:
                result = await handler(delivery)
            return stamp(result, environments)
        finally:
            current_step.reset(token)

    return replace(spec, handler=bound)


def digest(text: str | bytes) -> dict[str, JsonValue]:
    """How an event names content it must not carry: its size and sha256."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return {
        "chars" if isinstance(text, str) else "bytes": len(text),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


@overload
def cap(value: str, *, limit: int = MAX_STRING, depth: int = 0) -> str: ...
@overload
def cap(value: Mapping[str, object], *, limit: int = MAX_STRING, depth: int = 0) -> dict[str, JsonValue]: ...
@overload
def cap(value: object, *, limit: int = MAX_STRING, depth: int = 0) -> JsonValue: ...
def cap(value: object, *, limit: int = MAX_STRING, depth: int = 0) -> JsonValue:
    """`value` (any value: what is not JSON becomes its `repr`) made small enough for an event:
    strings redacted and cut, lists and mappings shortened, nesting bounded."""
    if isinstance(value, str):
        value = _redact(value)
        return value if len(value) <= limit else f"{value[:limit]}… [{len(value)} chars]"
    if depth >= MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        items = list(value.items())
        out: dict[str, JsonValue] = {
            str(k)[:100]: cap(v, limit=limit, depth=depth + 1) for k, v in items[:MAX_ITEMS]
        }
        if len(items) > MAX_ITEMS:
            out["…"] = f"{len(items) - MAX_ITEMS} more keys"
        return out
    if isinstance(value, list | tuple):
        out_list: list[JsonValue] = [cap(v, limit=limit, depth=depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            out_list.append(f"… {len(value) - MAX_ITEMS} more")
        return out_list
    if value is None or isinstance(value, bool | int | float):
        return value
    return cap(repr(value), limit=limit, depth=depth)


Publish = Callable[[str, Envelope], Awaitable[Any]]


async def publish_event(
    bus: Bus, kind: str, message: str, data: Mapping[str, object], *, step: StepInfo, id: str | None = None
) -> None:
    """Publish an event of `kind` on the task of `step`; `data` (any values: `cap` makes them
    JSON) gets the trace id, step and role.
    Never raises: an event lost to a bus hiccup is logged, the work goes on."""
    full = {**data, "role": step.role, "step_id": step.step_id, "trace_id": step.trace_id}
    event = Event(name=kind, message=cap(message, limit=300), data=cap(full))
    envelope = Envelope.wrap(event, task_id=step.task_id, trace_id=step.trace_id, id=id)
    try:
        await bus.publish(subjects.event(step.task_id, kind), envelope)
    except BusError as exc:
        log.warning("%s event of task %s not published: %s", kind, step.task_id, exc)
