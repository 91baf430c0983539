"""A task's events for the console: read what is stored, follow what comes, and say each in one row.

Rows carry the stream sequence of their event: a page renders the events stored when it was
asked for and names the last sequence; its stream follows from the next one, so nothing falls
between the page and the stream and nothing shows twice. Events are shown as they are on the
bus, which is after the publishers' redaction (secrets masked, file contents and patches as
their size and hash): the console adds nothing a `codeloop watch` does not print.
"""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from bus import subjects
from bus.connection import Bus
from bus.envelope import Envelope, parse_envelope
from bus.errors import MalformedMessage
from bus.stored import Follower, follow, read_batch

READ_TIMEOUT_S = 5.0
"""A task's stored events arrive at once; past this long, a read returns those that came."""
IDLE_CHECK_S = 5.0
"""How long a follower waits for an event before checking whether the connection was re-made."""
DETAIL_CHARS = 4000
PANEL_EVENTS = frozenset(
    {
        "transition",
        "plan",
        "retrieval",
        "code",
        "verification",
        "confirmation_requested",
        "confirmation_answered",
        "hand_off",
    }
)
"""Events after which the task's panel (status, plan, files, diff, verdict, questions) changed."""


@dataclass(frozen=True)
class Stored:
    seq: int
    """The event's sequence in the events stream."""
    envelope: Envelope


@dataclass(frozen=True)
class RawEvent:
    """One stored event as the bus holds it, not parsed yet."""

    seq: int
    """The event's sequence in the events stream."""
    data: bytes


@dataclass(frozen=True)
class EventRow:
    """One event as the timeline shows it."""

    seq: int
    at: str
    role: str
    name: str
    summary: str
    details: str | None
    """Pretty JSON of what the event carries (arguments, outcome, tokens), shown collapsed."""
    refresh: bool
    """The task's panel changed: the page fetches it again."""
    final: bool


async def read_events(bus: Bus, task_id: str, *, after: int = 0) -> list[Stored]:
    """Every event stored on the task's subjects after stream sequence `after`, in stream order
    (malformed ones left out)."""
    stored: list[Stored] = []
    for raw in await read_raw_events(bus, task_id, after=after):
        try:
            stored.append(Stored(raw.seq, parse_envelope(raw.data)))
        except MalformedMessage:
            pass
    return stored


async def read_raw_events(bus: Bus, task_id: str, *, after: int = 0) -> list[RawEvent]:
    """The task's stored events after stream sequence `after`, unparsed, in stream order, read in
    one batch (`bus.stored.read_batch`: a 500-event page's time was mostly a per-message wait)."""
    found = await read_batch(
        bus, subjects.EVENTS_STREAM, subjects.task_events(task_id), after=after, timeout_s=READ_TIMEOUT_S
    )
    return [RawEvent(m.seq, m.data) for m in found]


@asynccontextmanager
async def follow_events(bus: Bus, task_id: str, *, after: int) -> AsyncIterator[AsyncIterator[Stored | None]]:
    """The task's events after stream sequence `after` (0: from its first), as they come, and
    None after every `IDLE_CHECK_S` without one (a caller's moment to ping); across a reconnect
    it subscribes again after the last one it gave, so none is lost or repeated."""
    async with follow(bus, subjects.task_events(task_id), after=after, idle_s=IDLE_CHECK_S) as follower:
        yield _events(follower)


async def _events(follower: Follower) -> AsyncIterator[Stored | None]:
    while True:
        msg = await follower.next()
        if msg is None:
            yield None
            continue
        try:
            envelope = parse_envelope(msg.data)
        except MalformedMessage:
            continue
        yield Stored(msg.seq, envelope)


def event_row(stored: Stored) -> EventRow:
    envelope = stored.envelope
    payload = envelope.payload
    at = envelope.sent_at.strftime("%H:%M:%S.%f")[:-3]
    if envelope.kind == "task_result":
        failure = f" ({payload['failure_class']})" if payload.get("failure_class") else ""
        return EventRow(
            stored.seq,
            at,
            "orchestrator",
            "result",
            f"ended {payload.get('status')}{failure}",
            None,
            True,
            True,
        )
    if envelope.kind == "dead_letter":
        summary = f"dead letter ({payload.get('reason')}): {str(payload.get('error', ''))[:200]}"
        return EventRow(stored.seq, at, "bus", "dead_letter", summary, _details(payload), True, False)
    if envelope.kind != "event":
        return EventRow(stored.seq, at, "-", envelope.kind, envelope.kind, None, False, False)
    name = str(payload.get("name", ""))
    given = payload.get("data")
    data: dict[str, JsonValue] = given if isinstance(given, dict) else {}
    role = str(data.get("role") or data.get("principal") or _default_role(name))
    summary, details = _describe(name, str(payload.get("message", "")), data)
    return EventRow(stored.seq, at, role, name, summary, details, name in PANEL_EVENTS, False)


def _default_role(name: str) -> str:
    orchestrated = ("transition", "plan", "retrieval", "code", "verification", "hand_off")
    return "orchestrator" if name in orchestrated else "-"


def _describe(name: str, message: str, data: dict[str, JsonValue]) -> tuple[str, str | None]:
    if name == "tool_call":
        error = f" [{data['error_type']}]" if data.get("error_type") else ""
        summary = (
            f"tool {data.get('server')}.{data.get('tool')} {data.get('outcome')}{error} "
            f"in {_number(data.get('duration_ms')):.0f} ms"
        )
        shown: dict[str, JsonValue] = {
            "arguments": data.get("arguments") or {},
            "outcome": data.get("outcome"),
        }
        if data.get("error"):
            shown["error"] = data["error"]
        return summary, _details(shown)
    if name == "model_call":
        cost = f" ${data['cost_usd']:.4f}" if data.get("cost_usd") is not None else ""
        summary = (
            f"model {_model_name(str(data.get('model')))} {data.get('outcome')}: {data.get('input_tokens', 0)}+"
            f"{data.get('output_tokens', 0)} tokens in {_number(data.get('latency_s')):.2f} s{cost}"
        )
        return summary, _details(data)
    if name == "transition":
        stage = f" ({data['stage']})" if data.get("stage") else ""
        failure = f" [{data['failure_class']}]" if data.get("failure_class") else ""
        return f"→ {data.get('status')}{stage}{failure} {message}".rstrip(), None
    return message or name, _details(data) if data else None


def _number(value: JsonValue) -> float:
    """A number of an event's data (a duration), 0 when it is absent."""
    return float(value) if isinstance(value, int | float | str) and value != "" else 0.0


def _model_name(name: str) -> str:
    """`function:/long/path/scripted.py:fix` as `function:scripted.py:fix` (the details keep the whole)."""
    if not name.startswith("function:"):
        return name
    path, sep, function = name.removeprefix("function:").rpartition(":")
    return f"function:{Path(path).name}{sep}{function}" if sep else name


def _details(data: JsonValue) -> str:
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "\n… (cut)"
