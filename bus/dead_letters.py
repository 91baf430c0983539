"""The dead-letter path: a message no worker can handle becomes a `DeadLetter` event, never silence.

Two routes lead here. A worker that sees a malformed message, or a handler failure on the last
allowed delivery, publishes the dead letter itself and terminates the message. A worker killed
while holding the last delivery cannot; JetStream then publishes a MAX_DELIVERIES advisory and
leaves the message in the work-queue stream, so `watch_max_deliveries`
reads it back, publishes the dead letter and deletes it.
"""

import json
import logging
import re
from contextlib import suppress

import anyio
from anyio.abc import TaskStatus

from bus import subjects
from bus.connection import Bus, nats_errors, queue_subscription
from bus.envelope import Envelope
from bus.errors import BusNotFound, BusTimeout, NoResponders
from bus.messages import DeadLetter

log = logging.getLogger("codeloop.bus")
DATA_LIMIT = 64 * 1024
UNKNOWN_TASK = "unknown"
_TASK_ID = re.compile(rb'"task_id"\s*:\s*"([^"]{1,200})"')


def guess_task_id(data: bytes) -> str:
    """The task id of a message we could not parse, if its bytes still show one."""
    found = _TASK_ID.search(data)
    return found.group(1).decode(errors="replace") if found else UNKNOWN_TASK


async def publish_dead_letter(
    bus: Bus,
    *,
    reason: str,
    error: str,
    subject: str,
    data: bytes,
    deliveries: int,
    task_id: str | None,
    origin: str,
) -> None:
    """Publish a `DeadLetter` on `codeloop.events.<task_id>.dead_letter`.

    `origin` (stream and sequence) makes the envelope id stable, so the two routes above, or a
    redelivery, dead-letter one message once.
    """
    task_id = task_id or guess_task_id(data)
    letter = DeadLetter(
        reason=reason,  # type: ignore[arg-type] - reason is one of the DeadLetter literals, checked by pydantic at construction
        error=error[:4000],
        subject=subject,
        data=data[:DATA_LIMIT].decode(errors="replace"),
        deliveries=deliveries,
    )
    envelope = Envelope.wrap(letter, task_id=task_id, id=f"dead-letter-{origin}")
    await bus.publish(subjects.event(task_id, "dead_letter"), envelope)
    log.warning("dead letter (%s) for task %s from %s: %s", reason, task_id, subject, error)


async def watch_max_deliveries(
    bus: Bus, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Turn MAX_DELIVERIES advisories of codeloop's streams into dead letters, until cancelled.

    Every codeloop process may run one; the queue group hands each advisory to one of them.
    """
    async with queue_subscription(
        bus, subjects.MAX_DELIVERIES_ADVISORY, "codeloop-dead-letters"
    ) as advisories:
        task_status.started()
        async for raw in advisories:
            await _dead_letter_retrying(bus, raw)


async def _dead_letter_retrying(bus: Bus, raw: bytes) -> None:
    # A node failover makes JetStream calls time out for a few seconds; the message waits in its
    # stream meanwhile, so retrying is safe. If it still fails, say so loudly: it stays stored.
    for delay in (0.5, 1.0, 2.0, 5.0, 10.0, None):
        try:
            await _dead_letter_from_advisory(bus, raw)
            return
        except (BusTimeout, NoResponders) as exc:
            if delay is None:
                log.error("could not dead-letter after a MAX_DELIVERIES advisory (%s): %s", exc, raw[:500])
                return
            await anyio.sleep(delay)


async def _dead_letter_from_advisory(bus: Bus, raw: bytes) -> None:
    advisory = json.loads(raw)
    stream, seq = advisory.get("stream", ""), int(advisory.get("stream_seq", 0))
    if stream not in (subjects.TASKS_STREAM, subjects.WORK_STREAM):
        return
    try:
        with nats_errors():
            stored = await bus.js.get_msg(stream, seq)
    except BusNotFound:  # handled (acknowledged) or dead-lettered by another process meanwhile
        return
    await publish_dead_letter(
        bus,
        reason="max_deliveries",
        error=f"not acknowledged after {advisory.get('deliveries')} deliveries to {advisory.get('consumer')}",
        subject=stored.subject or "",
        data=stored.data or b"",
        deliveries=int(advisory.get("deliveries", 0)),
        task_id=None,
        origin=f"{stream}-{seq}",
    )
    with suppress(BusNotFound), nats_errors():
        await bus.js.delete_msg(stream, seq)
