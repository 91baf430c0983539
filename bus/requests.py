"""Core-NATS request/reply for services that answer at once (the workspace service).

Work that must survive a crash goes through JetStream (`bus.actor`); a request here is cheap to
repeat and its answer is needed now, so a plain NATS request fits: the caller waits for one reply
or a timeout, and several responders in one queue group share the requests. Payloads are the
JSON of `bus.messages.Message` models, looked up by their `kind` like envelopes' payloads.
"""

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
from anyio.abc import TaskStatus
from nats.aio.msg import Msg
from pydantic import ValidationError

from bus.connection import Bus, nats_errors
from bus.errors import MalformedMessage
from bus.messages import Message, payload_model

log = logging.getLogger(__name__)
Responder = Callable[[Message], Awaitable[Message]]


def decode(data: bytes) -> Message:
    """The registered payload `data` is the JSON of.

    Raises:
        MalformedMessage: not JSON of a registered kind.
    """
    try:
        fields = json.loads(data)
    except ValueError as exc:
        raise MalformedMessage(f"not JSON: {exc}") from None
    kind = cast(dict[str, Any], fields).get("kind") if isinstance(fields, dict) else None
    model = payload_model(str(kind))
    if model is None:
        raise MalformedMessage(f"unknown kind {kind!r}")
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise MalformedMessage(f"bad {model.__name__}: {exc.errors()[0]['msg']}") from None


async def request(bus: Bus, subject: str, message: Message, *, timeout_s: float) -> Message:
    """Send `message` to whoever answers on `subject`; their reply, decoded.

    Raises:
        NoResponders: nobody subscribes to `subject`.
        BusTimeout: no reply within `timeout_s`.
        MalformedMessage: the reply is not a registered payload.
    """
    with nats_errors():
        reply = await bus.nc.request(subject, message.model_dump_json().encode(), timeout=timeout_s)
    return decode(reply.data)


async def respond(
    bus: Bus,
    subject: str,
    answer: Responder,
    *,
    queue: str = "",
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Answer every request on `subject` (`queue`: share them with the group's other members)
    with `answer(request)`, each in its own task, until cancelled; `started()` once subscribed.

    A request that is not a registered payload is logged and left unanswered (the caller times
    out); `answer` turns the failures it expects into replies itself."""
    with nats_errors():
        subscription = await bus.nc.subscribe(subject, queue=queue)  # pyright: ignore[reportUnknownMemberType] - nats-py types its callback as a bare Callable
    try:
        task_status.started()
        async with anyio.create_task_group() as tg:
            async for msg in subscription.messages:
                tg.start_soon(_answer, msg, answer)
    finally:
        with anyio.CancelScope(shield=True), nats_errors():
            await subscription.unsubscribe()


async def _answer(msg: Msg, answer: Responder) -> None:
    try:
        request_message = decode(msg.data)
    except MalformedMessage as exc:
        log.warning("ignoring a request on %s: %s", msg.subject, exc)
        return
    reply = await answer(request_message)
    if msg.reply:
        await msg.respond(reply.model_dump_json().encode())


async def watch_subjects(
    bus: Bus,
    subject: str,
    seen: Callable[[str], Awaitable[None]],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Call `seen(subject)` for every message on the wildcard `subject`, in order, until cancelled;
    never replies (a JetStream publish's reply subject is its publisher's ack inbox)."""
    with nats_errors():
        subscription = await bus.nc.subscribe(subject)  # pyright: ignore[reportUnknownMemberType] - nats-py types its callback as a bare Callable
    try:
        task_status.started()
        async for msg in subscription.messages:
            await seen(msg.subject)
    finally:
        with anyio.CancelScope(shield=True), nats_errors():
            await subscription.unsubscribe()
