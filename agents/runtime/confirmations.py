"""Human confirmation of high-risk tool calls, across processes: nothing is approved by default.

When a tool server asks (an MCP elicitation: a write to a protected path, a deletion, a command
off the allowlist), the coder's worker does not decide. It writes a pending request to the task
bucket (`confirm.<task_id>.<request_id>`), publishes a `confirmation_requested` event with the
question, and waits for a person: `codeloop run` on a terminal asks at once; anyone else answers
with `codeloop approve TASK_ID` or `codeloop deny TASK_ID`, which change the pending record by
compare-and-set, and then note who answered (`answered.<task_id>.<request_id>`, `{"by": ...}`).
No answer within the task's `confirm_timeout_s` is a refusal, as is every error on the way: the
tool call then does nothing and the model hears that it was not approved. Every answer is also
handed to the asking role (`on_answer`): the coder keeps the approvals, so the paths a person
approved travel with the task to the verifier and into its record.
"""

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from bus import subjects
from bus.connection import Bus, nats_errors
from bus.envelope import Envelope, parse_envelope
from bus.errors import BusError, MalformedMessage
from bus.messages import Event
from bus.records import Bucket, compare_and_set, read
from bus.stored import last_message

PENDING, APPROVED, DENIED = b"pending", b"approve", b"deny"
POLL_S = 0.25
"""How often a waiting worker looks at the request; a person answers in seconds, not milliseconds."""
ANSWERER_WAIT_S = 2.0
"""How long a worker that saw an answer waits for the answerer's name, written just after it."""


@dataclass(frozen=True)
class Answer:
    """How a confirmation request ended."""

    approved: bool
    question: str
    request_id: str
    by: str
    """`person` or `timeout`, as the `confirmation_answered` event says."""
    answered_by: str | None = None
    """Who answered, as the answering client named them (`alice with codeloop approve`); None
    after a timeout, or when the client named nobody."""


@dataclass(frozen=True)
class Pending:
    """A confirmation request waiting for a person."""

    request_id: str
    question: str
    timeout_s: float


def _key(task_id: str, request_id: str) -> str:
    return f"confirm.{subjects.token(task_id)}.{subjects.token(request_id)}"


def _answerer_key(task_id: str, request_id: str) -> str:
    return f"answered.{subjects.token(task_id)}.{subjects.token(request_id)}"


async def ask(bus: Bus, task_id: str, question: str, *, timeout_s: float) -> Answer:
    """Ask a person `question` for `task_id`; approved only on an explicit approval within `timeout_s`."""
    request_id = uuid.uuid4().hex[:12]
    key = _key(task_id, request_id)
    try:
        kv = await bus.kv(subjects.TASKS_BUCKET)
        await compare_and_set(kv, key, lambda current: PENDING if current is None else None)
        await _event(
            bus,
            task_id,
            "confirmation_requested",
            f"confirmation needed: {question}",
            {"request_id": request_id, "question": question, "timeout_s": timeout_s},
        )
        answer = PENDING
        with anyio.move_on_after(timeout_s):
            while answer == PENDING:
                await anyio.sleep(POLL_S)
                answer = (await read(kv, key)).value or PENDING
        by = "person"
        if answer == PENDING:  # nobody answered: close the request so a late answer changes nothing
            closed = []

            def close(current: bytes | None) -> bytes | None:
                closed[:] = [current == PENDING]
                return DENIED if current == PENDING else None

            await compare_and_set(kv, key, close)
            by = "timeout" if closed == [True] else "person"
            answer = (await read(kv, key)).value or DENIED
        approved = answer == APPROVED
        answerer = await _answerer(kv, task_id, request_id) if by == "person" else None
        await _event(
            bus,
            task_id,
            "confirmation_answered",
            f"{'approved' if approved else 'declined'} ({answerer or by}): {question}",
            {"request_id": request_id, "approved": approved, "by": by, "answered_by": answerer},
        )
        return Answer(approved, question, request_id, by, answerer)
    except BusError:
        return Answer(False, question, request_id, "error")


async def _answerer(kv: Bucket, task_id: str, request_id: str) -> str | None:
    """Who answered the request, as the answering client recorded it (just after its answer)."""
    with anyio.move_on_after(ANSWERER_WAIT_S):
        while True:
            raw = (await read(kv, _answerer_key(task_id, request_id))).value
            if raw is not None:
                try:
                    return str(json.loads(raw)["by"])[:200]
                except (ValueError, KeyError, TypeError):
                    return None
            await anyio.sleep(POLL_S / 5)
    return None


async def answer(
    bus: Bus, task_id: str, *, approve: bool, request_id: str | None = None, by: str | None = None
) -> list[str]:
    """Answer the task's pending requests (or the one `request_id` names); returns those this call
    answered. `by` names who answers (`alice with codeloop approve`); the task's record keeps it
    beside every path an approval let the coder change."""
    kv = await bus.kv(subjects.TASKS_BUCKET)
    prefix = f"confirm.{subjects.token(task_id)}."
    try:
        keys = [k for k in await kv.keys() if k.startswith(prefix)]
    except Exception:  # nats raises NoKeysError for an empty bucket
        keys = []
    answered = []
    value = APPROVED if approve else DENIED
    for key in keys:
        rid = key.removeprefix(prefix)
        if request_id is not None and rid != request_id:
            continue
        if await _settle(kv, key, value):
            answered.append(rid)
            if by:
                with nats_errors():
                    await kv.put(_answerer_key(task_id, rid), json.dumps({"by": by}).encode())
    return answered


async def _settle(kv: Bucket, key: str, value: bytes) -> bool:
    """Turn the pending request at `key` into `value`; False when it was not pending any more."""
    changed: list[bool] = []

    def settle(current: bytes | None) -> bytes | None:
        changed[:] = [current == PENDING]
        return value if current == PENDING else None

    await compare_and_set(kv, key, settle)
    return changed == [True]


async def pending_confirmation(bus: Bus, task_id: str) -> Pending | None:
    """The task's confirmation request still waiting for an answer (its latest), or None."""
    subject = subjects.event(task_id, "confirmation_requested")
    try:
        msg = await last_message(bus, subjects.EVENTS_STREAM, subject)
        data = parse_envelope(msg.data).payload.get("data") or {}
        request_id = str(data.get("request_id", ""))
        kv = await bus.kv(subjects.TASKS_BUCKET)
        if (await read(kv, _key(task_id, request_id))).value != PENDING:
            return None
    except (BusError, MalformedMessage):
        return None  # never asked (the event is not found), or the stream is away
    return Pending(request_id, str(data.get("question", "")), float(data.get("timeout_s", 0)))


async def _event(bus: Bus, task_id: str, name: str, message: str, data: dict[str, object]) -> None:
    event = Event(name=name, message=message, data=data)
    await bus.publish(subjects.event(task_id, name), Envelope.wrap(event, task_id=task_id))


OnAnswer = Callable[[Answer], Awaitable[None] | None]
ElicitationHandler = Callable[[str, object, object, object], Awaitable[dict[str, object]]]
"""An MCP elicitation handler as pydantic-ai's `MCPToolset` calls it: (message, the response type,
the request's params, the request context) -> the response; ours reads only the message."""


def elicitation_handler(
    bus: Bus, task_id: str, *, timeout_s: float, on_answer: OnAnswer | None = None
) -> ElicitationHandler:
    """An MCP elicitation handler (pydantic-ai `MCPToolset`) that asks a person through the bus;
    `on_answer` hears every answer (the coder keeps the approvals for the verifier)."""

    async def handle(
        message: str, response_type: object, params: object, context: object
    ) -> dict[str, object]:
        reply = await ask(bus, task_id, message, timeout_s=timeout_s)
        if on_answer is not None:
            heard = on_answer(reply)
            if heard is not None:
                await heard
        return {"approve": reply.approved}

    return handle
