"""Server-Sent Events from the bus to the browser: a task's new events, and changes to the task list.

A task page's stream follows the task's event subjects (an ordered JetStream consumer, the one
`codeloop watch` uses) from the sequence after the page's last event, and sends each as a rendered
timeline row (`event: row`); `console.js` appends it and, when the row says so, fetches the panel
again. The list's stream listens to every task's events (a plain subscription, as the tasks
server's change feed) and sends the fresh row of each changed task the caller may see (`event:
task`), or its id when it no longer matches the list's filter (`event: gone`).

Each stream ends when the browser goes (Starlette cancels the generator), when the task ends
(after its result), or when the console stops. A comment line every `PING_S` keeps proxies from
closing a quiet stream and finds a browser that left.
"""

from collections.abc import AsyncIterator

import anyio

from codeloop.console.access import Grant
from codeloop.console.events import event_row, follow_events
from codeloop.console.pages import render, render_row
from codeloop.console.tasks import ConsoleTasks

PING_S = 15.0
BATCH_S = 0.05
"""The list's stream gathers the changes of this long before reading the changed tasks' records."""


def sse(event: str, data: str, *, event_id: int | None = None) -> str:
    """One SSE message: each line of `data` its own `data:` field (the browser joins them with
    newlines); `event_id` is what a reconnecting browser sends back as `Last-Event-ID`."""
    lines = "".join(f"data: {line}\n" for line in data.splitlines() or [""])
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\n{lines}\n"


async def task_stream(tasks: ConsoleTasks, task_id: str, *, after: int) -> AsyncIterator[str]:
    yield ": following\n\n"  # the browser's EventSource opens at once
    async with follow_events(tasks.bus, task_id, after=after) as events:
        async for stored in events:
            if stored is None:
                yield ": ping\n\n"
                continue
            row = event_row(stored)
            yield sse("row", render_row(row), event_id=row.seq)
            if row.final:
                yield sse("end", "")
                return


async def list_stream(
    tasks: ConsoleTasks, grant: Grant, *, status: str | None, principal: str | None
) -> AsyncIterator[str]:
    yield ": following\n\n"
    async with tasks.backend.changes() as changes:
        while True:
            task_id = None
            with anyio.move_on_after(PING_S):
                task_id = await anext(changes)
            if task_id is None:
                yield ": ping\n\n"
                continue
            # A busy task publishes many events at once: its row is read and sent once per batch.
            changed = {task_id}
            with anyio.move_on_after(BATCH_S):
                while True:
                    changed.add(await anext(changes))
            for one in sorted(changed):
                row = await tasks.row(grant, one)
                if row is None:
                    continue
                if (status and row.status != status) or (principal and row.principal != principal):
                    yield sse("gone", one)
                else:
                    yield sse("task", render("task_row.html", r=row))
