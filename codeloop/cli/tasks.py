"""`codeloop submit | watch | status | schema`: hand a task to the bus, follow it, read its record.

nats, the bus runtime and the agents are imported inside the commands so `codeloop --help` stays fast.
"""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail, os_error_message, read_text_argument, usage_error
from codeloop.cli.connection import Connection, JsonOpt, run_async
from codeloop.cli.option_groups import with_option_groups
from codeloop.cli.run import EXIT_CODES, refuse_over_quota, refuse_unserved
from codeloop.cli.task_options import McpConfigOpt, ModeOpt, TaskFlags, build_task
from codeloop.cli.task_page import listing, page
from codeloop.config.task_options import TaskOptions

if TYPE_CHECKING:
    from agents.messages import TaskState
    from bus.connection import Bus
    from bus.envelope import Envelope
    from bus.inflight import Unacked
    from codeloop.continuing import ContinuedTask


@with_option_groups
def submit(
    task: Annotated[
        str | None,
        typer.Argument(
            help="What to do, in words; @FILE for a file's text, - for stdin. With --continue: the "
            "new instruction (optional)."
        ),
    ] = None,
    repo: Annotated[
        Path | None, typer.Option("--repo", help="Repository the task is about (not with --continue).")
    ] = None,
    mode: ModeOpt = "read",
    *,
    # --pipeline after --task-id: where `submit --help` has always listed it
    options: Annotated[TaskOptions, TaskFlags(after={"pipeline": "task_id"})],
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Your own task id (resubmits are ignored).")
    ] = None,
    mcp_config: McpConfigOpt = None,
    continues: Annotated[
        str | None,
        typer.Option(
            "--continue",
            help="Continue this ended task instead (`codeloop continue`, not followed): its patch, "
            "plan and account, TASK as a new instruction; the repository and mode are its own.",
        ),
    ] = None,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Submit a task (its working tree captured first); prints its id: follow it with `codeloop watch ID`."""
    from agents.client import submit_task
    from agents.workspace import WorkspaceError
    from bus.connection import open_bus
    from codeloop.config.serve_note import client_bus_config
    from codeloop.snapshots import capture_repository

    if continues is not None:
        _submit_continuation(continues, task, repo, options, task_id, connection, as_json=as_json)
        return
    if task is None or repo is None:
        raise usage_error(
            "submit needs the task's text and --repo (or --continue ID to continue an ended task)"
        )
    payload = build_task(task, repo, mode=mode, options=options, task_id=task_id, mcp_config=mcp_config)
    payload = payload.model_copy(update={"interactive": False})

    async def main() -> None:
        config = client_bus_config(**connection)
        async with open_bus(config) as bus:
            await refuse_unserved(bus, payload)
            await refuse_over_quota(bus, payload)
            try:
                snapshot = await capture_repository(bus, Path(payload.repo))
            except WorkspaceError as exc:
                raise fail(str(exc)) from None
            try:
                envelope, published = await submit_task(
                    bus, payload.model_copy(update={"snapshot": snapshot}), task_id=task_id
                )
            except ValueError as exc:
                raise fail(str(exc), 2) from None
        if as_json:
            typer.echo(
                json.dumps(
                    {"task_id": envelope.task_id, "duplicate": published.duplicate, "seq": published.seq}
                )
            )
        else:
            typer.echo(envelope.task_id)

    run_async(main)


def _submit_continuation(
    parent_id: str,
    text: str | None,
    repo: Path | None,
    options: TaskOptions,
    task_id: str | None,
    connection: Connection,
    *,
    as_json: bool,
) -> None:
    """`submit --continue ID [TEXT]`: the continuation `codeloop continue` would run, submitted
    and not followed; prints the new task's id.

    Raises:
        typer.Exit: (2) --repo given, no such task, a task still running, invalid options.
    """
    from bus.connection import open_bus
    from bus.validation import MAX_TASK_TEXT_BYTES
    from codeloop.cli.task_ids import checked_id, lookup_task
    from codeloop.config.serve_note import client_bus_config
    from codeloop.continuing import ContinueRefused, continue_task

    if repo is not None:
        raise usage_error("--continue keeps the repository of the task it continues: leave out --repo")
    checked_id(parent_id)
    instruction = (
        read_text_argument(text, what="instruction", max_bytes=MAX_TASK_TEXT_BYTES)
        if text is not None
        else None
    )

    async def main() -> "ContinuedTask":
        async with open_bus(client_bus_config(**connection)) as bus:
            found = await lookup_task(bus, parent_id)
            if found is None:
                raise usage_error(f"no task {parent_id} to continue (`codeloop status` lists the tasks)")
            try:
                return await continue_task(
                    bus, found.task_id, text=instruction, options=options, new_id=task_id
                )
            except ContinueRefused as exc:
                raise usage_error(str(exc)) from None

    continued = run_async(main)
    if as_json:
        typer.echo(json.dumps({"task_id": continued.task_id, "parent_task_id": continued.parent_task_id}))
    else:
        typer.echo(continued.task_id)


@with_option_groups
def watch(
    task_id: Annotated[
        str, typer.Argument(help="Task id printed by `codeloop submit` (a unique prefix will do).")
    ],
    *,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Print a task's events as they happen, from its first, until the task ends.

    Exit codes: 0 done or diagnosed, 3 handed off, 4 cancelled, 1 failed or no such task, 130 Ctrl-C.
    """
    from agents.client import watch_task
    from bus.connection import open_bus
    from bus.validation import RESERVED_TASK_IDS
    from codeloop.cli.task_ids import find_task
    from codeloop.config.serve_note import client_bus_config
    from codeloop.observe.render import event_line

    def show(envelope: "Envelope") -> None:
        if as_json:
            typer.echo(envelope.model_dump_json())
            return
        typer.echo(event_line(envelope))
        sys.stdout.flush()

    async def main() -> str | None:
        config = client_bus_config(**connection)
        async with open_bus(config) as bus:
            # `mcp` collects the hosted tool servers' events: it has no record and never ends
            full_id = task_id if task_id in RESERVED_TASK_IDS else (await find_task(bus, task_id)).task_id
            final = await watch_task(bus, full_id, show)
        return final.payload.get("status") if final else None

    try:
        status = run_async(main)
    except KeyboardInterrupt:
        # Watching is only looking: the task itself goes on in the serve.
        raise fail(
            f"stopped watching; task {task_id} goes on: `codeloop cancel {task_id}` stops it", 130
        ) from None
    raise typer.Exit(EXIT_CODES.get(status or "", 1))


@with_option_groups
def status(
    task_id: Annotated[
        str | None, typer.Argument(help="One task (a unique prefix will do); omitted = all tasks.")
    ] = None,
    *,
    patch: Annotated[
        bool,
        typer.Option("--patch", help="Print only the task's patch (for `git apply`); exit 1 without one."),
    ] = False,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Show one task's record as a page (status, stage, verdict, failure, files, usage, what it
    waits for, its report), or list all tasks."""

    if patch and task_id is None:
        raise usage_error("--patch needs a task id: `codeloop status TASK_ID --patch`")
    states, notes, children = run_async(lambda: _records(connection, task_id))
    if patch:
        _print_patch(states[0])
        return
    if as_json:
        # The records as stored (the JSON contract); what a task waits for is a note on stderr.
        typer.echo(
            states[0].model_dump_json()
            if task_id
            else json.dumps([s.model_dump(mode="json") for s in states])
        )
        for s in states:
            for note in notes.get(s.task_id, []):
                typer.echo(f"{s.task_id}: {note}", err=True)
        return
    if task_id is not None:
        typer.echo(page(states[0], notes.get(states[0].task_id, []), continued_by=children))
        return
    width = shutil.get_terminal_size().columns
    typer.echo(listing(states, notes, tty=sys.stdout.isatty(), width=width))


async def _records(
    connection: Connection, task_id: str | None
) -> "tuple[list[TaskState], dict[str, list[str]], list[str]]":
    """The records `status` shows (one task's, or all); per unfinished task, why it makes no
    progress: a confirmation waiting for a person, a message held unacknowledged, no live worker;
    and for one task, the tasks that continue it."""
    from agents.continuing import continued_by
    from agents.messages import TERMINAL_STATUSES
    from agents.orchestrator.records import TaskRecords
    from bus.connection import open_bus
    from bus.inflight import unacked_tasks
    from codeloop.cli.task_ids import find_task
    from codeloop.config.serve_note import client_bus_config

    async with open_bus(client_bus_config(**connection)) as bus:
        if task_id is None:
            states = await (await TaskRecords.open(bus)).all()
        else:
            found = await find_task(bus, task_id)
            if found.state is None:
                raise fail(
                    f"task {found.task_id} is submitted and waits for the orchestrator: is `codeloop serve` running?"
                )
            states = [found.state]
        running = [s for s in states if s.status not in TERMINAL_STATUSES]
        unacked = await unacked_tasks(bus) if running else {}
        children = []
        if task_id is not None and states[0].status in TERMINAL_STATUSES:
            children = continued_by(states[0].task_id, await (await TaskRecords.open(bus)).all())
        return states, {s.task_id: await _notes(bus, s, unacked) for s in running}, children


def _print_patch(state: "TaskState") -> None:
    if not state.patch:
        raise fail(f"task {state.task_id} has no patch ({state.status}, mode {state.task.mode})")
    typer.echo(state.patch, nl=not state.patch.endswith("\n"))


async def _notes(bus: "Bus", state: "TaskState", unacked: "dict[str, Unacked]") -> list[str]:
    """Why an unfinished task makes no progress: a high-risk call waits for a person's answer, its
    message is held by a worker that has not acknowledged it (redelivered if that worker died),
    and/or no live worker serves its role."""
    from agents.runtime.confirmations import pending_confirmation

    notes = []
    pending = await pending_confirmation(bus, state.task_id)
    if pending is not None:
        notes.append(
            f"waiting for your answer: {pending.question} (`codeloop approve {state.task_id}` or "
            f"`codeloop deny {state.task_id}`)"
        )
    if state.task_id in unacked:
        notes.append(_waiting_note(unacked[state.task_id]))
    if state.waiting_for:
        notes.append(f"waiting for a worker of role {state.waiting_for}")
    return notes


def _waiting_note(unacked: "Unacked") -> str:
    return (
        f"handed to {unacked.consumer}, not yet acknowledged: in progress, or redelivered "
        f"{unacked.ack_wait_s:g} s after delivery if its worker stopped"
    )


def schema(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Print the JSON Schema of the envelope and every message, for agents in other languages."""
    import agents.messages
    import agents.roles.echo  # noqa: F401
    from bus.messages import json_schemas

    text = json.dumps(json_schemas(), indent=2)
    if output:
        try:
            _write_whole(output, text + "\n")
        except OSError as exc:
            raise fail(
                f"cannot write the schemas to {output}: {os_error_message(exc, with_path=False)}", 2
            ) from None
        typer.echo(f"wrote {output}", err=True)
    else:
        typer.echo(text)


def _write_whole(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`: a failure
    leaves `path` as it was, never half-written."""
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as file:
            file.write(text)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    for command in (submit, watch, status, schema):
        app.command()(command)
