"""`codeloop cancel | approve | deny`: stop a task, or answer its pending high-risk tool call."""

from typing import Annotated

import typer

from codeloop.cli.common import fail
from codeloop.cli.connection import Connection, run_async
from codeloop.cli.option_groups import with_option_groups


def _answer(task_id: str, request_id: str | None, connection: Connection, *, approve: bool) -> None:
    from agents.runtime.confirmations import answer
    from bus.connection import open_bus
    from codeloop.config.serve_note import client_bus_config

    async def main() -> list[str]:
        async with open_bus(client_bus_config(**connection)) as bus:
            return await answer(bus, task_id, approve=approve, request_id=request_id)

    answered = run_async(main)
    if not answered:
        raise fail(f"task {task_id} has no pending confirmation" + (f" {request_id}" if request_id else ""))
    typer.echo(f"{'approved' if approve else 'denied'}: {', '.join(answered)}")


@with_option_groups
def cancel(
    task_id: Annotated[str, typer.Argument(help="The task to stop.")],
    *,
    connection: Connection,
) -> None:
    """Stop a task: it ends `cancelled`; a step in flight finishes, but its result is ignored."""
    from agents.client import cancel_task
    from agents.orchestrator.records import TaskRecords
    from bus.connection import open_bus
    from codeloop.config.serve_note import client_bus_config

    async def main() -> str | None:
        async with open_bus(client_bus_config(**connection)) as bus:
            state = await (await TaskRecords.open(bus)).get(task_id)
            if state is None:
                return None
            await cancel_task(bus, task_id)
            return state.status

    status = run_async(main)
    if status is None:
        raise fail(f"no task {task_id!r} (see `codeloop status`)")
    typer.echo(f"cancel sent to task {task_id} (it was {status})")


RequestOpt = Annotated[
    str | None, typer.Option("--request", help="One request id (default: every pending one).")
]


@with_option_groups
def approve(
    task_id: Annotated[str, typer.Argument(help="The task whose pending confirmation to approve.")],
    request: RequestOpt = None,
    *,
    connection: Connection,
) -> None:
    """Approve a task's pending high-risk tool call (see its confirmation_requested event)."""
    _answer(task_id, request, connection, approve=True)


@with_option_groups
def deny(
    task_id: Annotated[str, typer.Argument(help="The task whose pending confirmation to deny.")],
    request: RequestOpt = None,
    *,
    connection: Connection,
) -> None:
    """Deny a task's pending high-risk tool call; unanswered requests are denied after a timeout."""
    _answer(task_id, request, connection, approve=False)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    for command in (approve, deny, cancel):
        app.command()(command)
