"""The client side of a task: submit it, follow its events, read its record.

This is what `codeloop submit/watch/status` and any other Python client use; a client in another
language does the same with the subjects of `bus/__init__.py` and the schemas of `codeloop schema`.
"""

import uuid
from collections.abc import Awaitable, Callable

from agents.messages import CancelTask, TaskResult, TaskSubmitted
from bus import subjects
from bus.connection import Bus, Published
from bus.envelope import Envelope, parse_envelope
from bus.errors import MalformedMessage
from bus.stored import follow


def new_task_id() -> str:
    return uuid.uuid4().hex


async def submit_task(
    bus: Bus, task: TaskSubmitted, *, task_id: str | None = None
) -> tuple[Envelope, Published]:
    """Publish `task` on `codeloop.task.submit`; the envelope id is the task id, so a resubmission
    (a retry after a lost ack, a double click) is stored once within the deduplication window and
    ignored by the orchestrator after it.

    Raises:
        ValueError: `task_id` cannot be a subject token (letters, digits, `-`, `_`).
        NoResponders: the streams do not exist (no `codeloop serve` has run against this server).
    """
    task_id = task_id or new_task_id()
    if not subjects.is_token(task_id):
        raise ValueError(f"task id {task_id!r} may only contain letters, digits, '-' and '_' (max 128)")
    envelope = Envelope.wrap(task, task_id=task_id, id=task_id)
    return envelope, await bus.publish(subjects.TASK_SUBMIT, envelope)


async def cancel_task(bus: Bus, task_id: str, *, reason: str = "cancelled by the user") -> Published:
    """Ask the orchestrator to stop `task_id`; a step in flight finishes but its result is ignored."""
    return await bus.publish(subjects.TASK_CANCEL, Envelope.wrap(CancelTask(reason=reason), task_id=task_id))


def is_final(envelope: Envelope) -> bool:
    """True for the event that ends a task's stream: its `TaskResult` (done, failed or handed off)."""
    return envelope.kind == TaskResult.model_fields["kind"].default


async def watch_task(
    bus: Bus,
    task_id: str,
    on_event: Callable[[Envelope], Awaitable[None] | None],
    *,
    until_final: bool = True,
) -> Envelope:
    """Replay the task's events from its first, then follow live; return the final one.

    Runs until the task's result arrives (`until_final`) or the caller cancels. Events that do not
    parse are skipped here: the dead-letter path reports them. Across a reconnect (the server
    restarted: its consumers may be gone) the watch subscribes again after the last event it saw,
    so it neither misses nor repeats one.
    """
    async with follow(bus, subjects.task_events(task_id), after=0, idle_s=_IDLE_CHECK_S) as events:
        while True:
            msg = await events.next()
            if msg is None:
                continue
            try:
                envelope = parse_envelope(msg.data)
            except MalformedMessage:
                continue
            shown = on_event(envelope)
            if shown is not None:
                await shown
            if until_final and is_final(envelope):
                return envelope


_IDLE_CHECK_S = 2.0
"""How long a watch waits for an event before checking whether the connection was re-made."""
