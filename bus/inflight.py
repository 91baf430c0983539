"""Which tasks have a message handed to a worker and not yet acknowledged.

After a restart (a worker or `serve` killed mid-task) such a message is redelivered only when its
ack wait runs out, so for up to that long the task's record shows no progress and looks stuck.
`status` asks here to say so instead. The task and work streams are work queues, so an
acknowledged message is deleted: a message still in the stream between a consumer's ack floor and
the last one it delivered is one that was delivered and not yet acknowledged.
"""

from dataclasses import dataclass

from bus import subjects
from bus.connection import Bus, nats_errors
from bus.envelope import Envelope
from bus.errors import BusNotFound

MAX_SCANNED = 1000
"""Messages looked at per consumer at most (its max_ack_pending is of this order)."""


@dataclass(frozen=True)
class Unacked:
    """A task's message delivered to a consumer and not yet acknowledged."""

    consumer: str
    """The durable consumer (one per role) that holds it."""
    ack_wait_s: float
    """After this long without an ack (or a progress heartbeat) JetStream redelivers it."""


async def unacked_tasks(bus: Bus) -> dict[str, Unacked]:
    """Task id -> its unacknowledged message, for every role's consumer."""
    found: dict[str, Unacked] = {}
    with nats_errors():
        for stream in (subjects.TASKS_STREAM, subjects.WORK_STREAM):
            for info in await bus.js.consumers_info(stream):
                first = (info.ack_floor.stream_seq if info.ack_floor else 0) + 1
                last = info.delivered.stream_seq if info.delivered else 0
                for seq in range(max(first, last - MAX_SCANNED + 1), last + 1):
                    try:
                        with nats_errors():
                            raw = await bus.js.get_msg(stream, seq)
                    except BusNotFound:
                        continue  # acknowledged, and so deleted
                    try:
                        # Only the envelope is read: this process need not know the payload's kind.
                        task_id = Envelope.model_validate_json(raw.data or b"").task_id
                    except ValueError:
                        continue
                    found[task_id] = Unacked(consumer=info.name, ack_wait_s=info.config.ack_wait or 0.0)
    return found
