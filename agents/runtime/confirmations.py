"""Human confirmation of high-risk tool calls, across processes: nothing is approved by default.

When a tool server asks (an MCP elicitation: a write to a protected path, a deletion, a command
off the allowlist), the coder's worker does not decide. It writes a pending request to the task
bucket (`confirm.<task_id>.<request_id>`), publishes a `confirmation_requested` event with the
question, and waits for a person: `codeloop run` on a terminal asks at once; anyone else answers
with `codeloop approve TASK_ID` or `codeloop deny TASK_ID`, which change the pending record by
compare-and-set. No answer within the task's `confirm_timeout_s` is a refusal, as is every error
on the way: the tool call then does nothing and the model hears that it was not approved.
"""

import uuid
from typing import Any

import anyio

from bus import subjects
from bus.connection import Bus
from bus.envelope import Envelope
from bus.errors import BusError
from bus.messages import Event
from bus.records import compare_and_set, read

PENDING, APPROVED, DENIED = b"pending", b"approve", b"deny"
POLL_S = 0.25
"""How often a waiting worker looks at the request; a person answers in seconds, not milliseconds."""


def _key(task_id: str, request_id: str) -> str:
    return f"confirm.{subjects.token(task_id)}.{subjects.token(request_id)}"


async def ask(bus: Bus, task_id: str, question: str, *, timeout_s: float) -> bool:
    """Ask a person `question` for `task_id`; True only on an explicit approval within `timeout_s`."""
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
        await _event(
            bus,
            task_id,
            "confirmation_answered",
            f"{'approved' if approved else 'declined'} ({by}): {question}",
            {"request_id": request_id, "approved": approved, "by": by},
        )
        return approved
    except BusError:
        return False


async def answer(bus: Bus, task_id: str, *, approve: bool, request_id: str | None = None) -> list[str]:
    """Answer the task's pending requests (or the one `request_id` names); returns those answered."""
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
        result = await compare_and_set(kv, key, lambda current: value if current == PENDING else None)
        if result.value == value:
            answered.append(rid)
    return answered


async def _event(bus: Bus, task_id: str, name: str, message: str, data: dict) -> None:
    event = Event(name=name, message=message, data=data)
    await bus.publish(subjects.event(task_id, name), Envelope.wrap(event, task_id=task_id))


def elicitation_handler(bus: Bus, task_id: str, *, timeout_s: float) -> Any:
    """An MCP elicitation handler (pydantic-ai `MCPToolset`) that asks a person through the bus."""

    async def handle(message: str, response_type: Any, params: Any, context: Any) -> dict[str, Any]:
        return {"approve": await ask(bus, task_id, message, timeout_s=timeout_s)}

    return handle
