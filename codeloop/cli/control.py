"""`codeloop cancel | approve | deny`: stop a task, or answer its pending high-risk tool call.

Each takes the task's id or a unique prefix of it (`codeloop.cli.task_ids`). A task that already
ended cannot be cancelled or answered: the command says how it ended and exits 1, as it does for
an id no task has.
"""

from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import approver, fail
from codeloop.cli.connection import Connection, run_async
from codeloop.cli.option_groups import with_option_groups

if TYPE_CHECKING:
    from agents.messages import TaskState


TaskIdArg = Annotated[str, typer.Argument(help="The task's id (a unique prefix will do).")]


def _answer(task_id: str, request_id: str | None, connection: Connection, *, approve: bool) -> None:
    from agents.messages import TERMINAL_STATUSES
    from agents.runtime.confirmations import answer
    from bus.connection import open_bus
    from codeloop.cli.task_ids import ended_how, find_task
    from codeloop.config.serve_note import client_bus_config

    command = "codeloop approve" if approve else "codeloop deny"

    async def main() -> "tuple[str, TaskState | None, list[str]]":
        async with open_bus(client_bus_config(**connection)) as bus:
            found = await find_task(bus, task_id)
            if found.state is not None and found.state.status in TERMINAL_STATUSES:
                return found.task_id, found.state, []
            answered = await answer(
                bus, found.task_id, approve=approve, request_id=request_id, by=approver(f"with {command}")
            )
            return found.task_id, found.state, answered

    full_id, state, answered = run_async(main)
    if state is not None and state.status in TERMINAL_STATUSES:
        raise fail(f"task {full_id} has ended ({ended_how(state)}): there is nothing to answer")
    if not answered:
        which = f" {request_id}" if request_id else ""
        where = f" ({state.status})" if state is not None else ""
        raise fail(f"task {full_id}{where} has no pending confirmation{which}")
    typer.echo(f"{'approved' if approve else 'denied'}: {', '.join(answered)} (task {full_id})")


@with_option_groups
def cancel(task_id: TaskIdArg, *, connection: Connection) -> None:
    """Stop a task: it ends `cancelled`; a step in flight finishes, but its result is ignored.

    Exit codes: 0 cancel sent; 1 no such task, or it has already ended.
    """
    from agents.client import cancel_task
    from agents.messages import TERMINAL_STATUSES
    from bus.connection import open_bus
    from codeloop.cli.task_ids import ended_how, find_task
    from codeloop.config.serve_note import client_bus_config

    async def main() -> "tuple[str, TaskState | None]":
        async with open_bus(client_bus_config(**connection)) as bus:
            found = await find_task(bus, task_id)
            if found.state is None or found.state.status not in TERMINAL_STATUSES:
                await cancel_task(bus, found.task_id)
            return found.task_id, found.state

    full_id, state = run_async(main)
    if state is not None and state.status in TERMINAL_STATUSES:
        raise fail(f"task {full_id} has already ended ({ended_how(state)}): nothing to cancel")
    typer.echo(f"cancel sent to task {full_id} (it was {state.status if state is not None else 'queued'})")


RequestOpt = Annotated[
    str | None, typer.Option("--request", help="One request id (default: every pending one).")
]


@with_option_groups
def approve(task_id: TaskIdArg, request: RequestOpt = None, *, connection: Connection) -> None:
    """Approve a task's pending high-risk tool call (see its confirmation_requested event, or
    `codeloop status ID`); the task's record keeps who approved which path."""
    _answer(task_id, request, connection, approve=True)


@with_option_groups
def deny(task_id: TaskIdArg, request: RequestOpt = None, *, connection: Connection) -> None:
    """Deny a task's pending high-risk tool call; unanswered requests are denied after a timeout."""
    _answer(task_id, request, connection, approve=False)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    for command in (approve, deny, cancel):
        app.command()(command)
