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
from typing import Any

import anyio
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bus import subjects
from bus.connection import Bus, nats_errors
from bus.envelope import Envelope, parse_envelope
from bus.errors import BusError, MalformedMessage

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
class RawEvent:
    """One stored event as the bus holds it, not parsed yet."""

    seq: int
    """The event's sequence in the events stream."""
    data: bytes


@dataclass(frozen=True)
class Stored:
    seq: int
    """The event's sequence in the events stream."""
    envelope: Envelope


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
    one batch.

    One ephemeral consumer pushes them all to a plain subscription whose callback only keeps the
    bytes: no per-message wait (a consumer's `next_msg` costs a task and a timer per message,
    most of the time a 500-event page took). The consumer's `num_pending` says at once when there
    is nothing to read, and each message's own pending count says when the last one arrived.
    Events published meanwhile may come too, after those (the stream's order holds). Should the
    last one not come within `READ_TIMEOUT_S`, those that came are returned: a caller reading
    from the last one it got misses nothing.
    """
    got: list[RawEvent] = []
    caught_up = anyio.Event()

    async def take(msg: Any) -> None:
        metadata = msg.metadata  # parsed from the reply subject at every access: once
        got.append(RawEvent(int(metadata.sequence.stream), msg.data))
        if metadata.num_pending == 0:
            caught_up.set()

    consumer = ConsumerConfig(
        filter_subject=subjects.task_events(task_id),
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after else DeliverPolicy.ALL,
        opt_start_seq=after + 1 if after else None,
        ack_policy=AckPolicy.NONE,
        mem_storage=True,
        inactive_threshold=READ_TIMEOUT_S,
    )
    with nats_errors():
        sub = await bus.nc.subscribe(bus.nc.new_inbox(), cb=take)
    name: str | None = None
    try:
        with nats_errors():
            info = await bus.js.add_consumer(subjects.EVENTS_STREAM, consumer, deliver_subject=sub.subject)
        name = info.name
        delivered = info.delivered.consumer_seq if info.delivered is not None else 0
        if info.num_pending or delivered:
            with anyio.move_on_after(READ_TIMEOUT_S):
                await caught_up.wait()
    finally:
        with anyio.CancelScope(shield=True):
            await _unsubscribe(bus, sub)
            if name is not None:
                await _delete_consumer(bus, name)
    return list(got)


async def _delete_consumer(bus: Bus, name: str) -> None:
    if bus.nc.is_closed:
        return
    try:
        with nats_errors():
            await bus.js.delete_consumer(subjects.EVENTS_STREAM, name)
    except BusError:
        pass  # gone already; else its inactive threshold removes it


@asynccontextmanager
async def follow_events(bus: Bus, task_id: str, *, after: int) -> AsyncIterator[AsyncIterator[Stored | None]]:
    """The task's events after stream sequence `after` (0: from its first), as they come, and
    None after every `IDLE_CHECK_S` without one (a caller's moment to ping); across a reconnect
    it subscribes again after the last one it gave, so none is lost or repeated."""
    follower = _Follower(bus, task_id, after)
    await follower.subscribe()
    try:
        yield follower.events()
    finally:
        with anyio.CancelScope(shield=True):
            await _unsubscribe(bus, follower.sub)


class _Follower:
    def __init__(self, bus: Bus, task_id: str, after: int) -> None:
        self.bus = bus
        self.task_id = task_id
        self.last = after
        self.sub: Any = None

    async def subscribe(self) -> None:
        start: dict[str, Any] = {"deliver_policy": DeliverPolicy.ALL}
        if self.last:
            start = {
                "deliver_policy": DeliverPolicy.BY_START_SEQUENCE,
                "config": ConsumerConfig(opt_start_seq=self.last + 1),
            }
        with nats_errors():
            self.sub = await self.bus.js.subscribe(
                subjects.task_events(self.task_id), ordered_consumer=True, **start
            )

    async def events(self) -> AsyncIterator[Stored | None]:
        reconnects = self.bus.nc.stats["reconnects"]
        while True:
            try:
                with nats_errors():
                    msg: Any = await self.sub.next_msg(timeout=IDLE_CHECK_S)
            except TimeoutError:
                if self.bus.nc.stats["reconnects"] != reconnects and self.bus.nc.is_connected:
                    reconnects = self.bus.nc.stats["reconnects"]
                    await _unsubscribe(self.bus, self.sub)
                    await self.subscribe()
                yield None
                continue
            seq = int(msg.metadata.sequence.stream)
            if seq <= self.last:
                continue
            self.last = seq
            try:
                envelope = parse_envelope(msg.data)
            except MalformedMessage:
                continue
            yield Stored(seq, envelope)


async def _unsubscribe(bus: Bus, sub: Any) -> None:
    if sub is not None and not bus.nc.is_closed:
        try:
            with nats_errors():
                await sub.unsubscribe()
        except BusError:
            pass


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
    data: dict[str, Any] = payload.get("data") or {}
    role = str(data.get("role") or data.get("principal") or _default_role(name))
    summary, details = _describe(name, str(payload.get("message", "")), data)
    return EventRow(stored.seq, at, role, name, summary, details, name in PANEL_EVENTS, False)


def _default_role(name: str) -> str:
    orchestrated = ("transition", "plan", "retrieval", "code", "verification", "hand_off")
    return "orchestrator" if name in orchestrated else "-"


def _describe(name: str, message: str, data: dict[str, Any]) -> tuple[str, str | None]:
    if name == "tool_call":
        error = f" [{data['error_type']}]" if data.get("error_type") else ""
        summary = (
            f"tool {data.get('server')}.{data.get('tool')} {data.get('outcome')}{error} "
            f"in {float(data.get('duration_ms') or 0):.0f} ms"
        )
        shown = {"arguments": data.get("arguments") or {}, "outcome": data.get("outcome")}
        if data.get("error"):
            shown["error"] = data["error"]
        return summary, _details(shown)
    if name == "model_call":
        cost = f" ${data['cost_usd']:.4f}" if data.get("cost_usd") is not None else ""
        summary = (
            f"model {_model_name(str(data.get('model')))} {data.get('outcome')}: {data.get('input_tokens', 0)}+"
            f"{data.get('output_tokens', 0)} tokens in {float(data.get('latency_s') or 0):.2f} s{cost}"
        )
        return summary, _details(data)
    if name == "transition":
        stage = f" ({data['stage']})" if data.get("stage") else ""
        failure = f" [{data['failure_class']}]" if data.get("failure_class") else ""
        return f"→ {data.get('status')}{stage}{failure} {message}".rstrip(), None
    return message or name, _details(data) if data else None


def _model_name(name: str) -> str:
    """`function:/long/path/scripted.py:fix` as `function:scripted.py:fix` (the details keep the whole)."""
    if not name.startswith("function:"):
        return name
    path, sep, function = name.removeprefix("function:").rpartition(":")
    return f"function:{Path(path).name}{sep}{function}" if sep else name


def _details(data: dict[str, Any]) -> str:
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS] + "\n… (cut)"
