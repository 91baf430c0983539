"""`codeloop submit | watch | status | schema`: hand a task to the bus, follow it, read its record.

nats, the bus runtime and the agents are imported inside the commands so `codeloop --help` stays fast.
"""

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from codeloop.cli.common import fail, os_error_message
from codeloop.cli.connection import Connection, JsonOpt, run_async
from codeloop.cli.option_groups import with_option_groups
from codeloop.cli.run import EXIT_CODES, refuse_unserved
from codeloop.cli.task_options import ModeOpt, RepoOpt, TaskArg, TaskFlags, build_task
from codeloop.config.task_options import TaskOptions


@with_option_groups
def submit(
    task: TaskArg,
    repo: RepoOpt,
    mode: ModeOpt = "read",
    *,
    # --pipeline after --task-id: where `submit --help` has always listed it
    options: Annotated[TaskOptions, TaskFlags(after={"pipeline": "task_id"})],
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Your own task id (resubmits are ignored).")
    ] = None,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Submit a task (its working tree captured first); prints its id: follow it with `codeloop watch ID`."""
    from agents.client import submit_task
    from agents.workspace import WorkspaceError
    from bus.connection import open_bus
    from codeloop.config.serve_note import client_bus_config
    from codeloop.wiring.snapshots import capture_repository

    payload = build_task(task, repo, mode=mode, options=options, task_id=task_id)
    payload = payload.model_copy(update={"interactive": False})

    async def main() -> None:
        config = client_bus_config(**connection)
        async with open_bus(config) as bus:
            await refuse_unserved(bus, payload)
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


@with_option_groups
def watch(
    task_id: Annotated[str, typer.Argument(help="Task id printed by `codeloop submit`.")],
    *,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Print a task's events as they happen, from its first, until the task ends."""
    from agents.client import watch_task
    from agents.orchestrator.records import TaskRecords
    from bus.connection import open_bus
    from codeloop.config.serve_note import client_bus_config
    from codeloop.observe.render import event_line

    def show(envelope: Any) -> None:
        if as_json:
            typer.echo(envelope.model_dump_json())
            return
        typer.echo(event_line(envelope))
        sys.stdout.flush()

    async def main() -> str | None:
        config = client_bus_config(**connection)
        async with open_bus(config) as bus:
            records = await TaskRecords.open(bus)
            full_id = await _resolve_task_id(records, task_id)
            if await records.get(full_id) is None:
                typer.echo(
                    f"no record of task {task_id} yet; waiting for its events (Ctrl-C to stop)", err=True
                )
            final = await watch_task(bus, full_id, show)
        return final.payload.get("status") if final else None

    try:
        status = run_async(main)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    raise typer.Exit(EXIT_CODES.get(status or "", 1))


@with_option_groups
def status(
    task_id: Annotated[str | None, typer.Argument(help="One task; omitted = all tasks.")] = None,
    *,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Show the record of one task, or a table of all tasks."""
    from agents.messages import TERMINAL_STATUSES
    from agents.orchestrator.records import TaskRecords
    from bus.connection import open_bus
    from bus.inflight import unacked_tasks
    from codeloop.config.serve_note import client_bus_config

    async def main() -> tuple[list[Any], dict[str, Any]]:
        config = client_bus_config(**connection)
        async with open_bus(config) as bus:
            records = await TaskRecords.open(bus)
            if task_id is None:
                found = await records.all()
            else:
                one = await records.get(await _resolve_task_id(records, task_id))
                found = [one] if one else []
            if not any(s.status not in TERMINAL_STATUSES for s in found):
                return found, {}
            return found, await unacked_tasks(bus)

    states, unacked = run_async(main)
    if task_id is not None and not states:
        raise fail(f"no task {task_id!r} (see `codeloop status` for all tasks)")
    if as_json:
        # The records as stored (the JSON contract); waiting messages are a note on stderr.
        typer.echo(
            states[0].model_dump_json()
            if task_id
            else json.dumps([s.model_dump(mode="json") for s in states])
        )
        for s in states:
            for note in _notes(s, unacked):
                typer.echo(f"{s.task_id}: {note}", err=True)
        return
    from rich.console import Console
    from rich.table import Column, Table

    # Ids are never cut (a cut id cannot be pasted into `watch`); text and answer give way.
    longest = max((len(s.task_id) for s in states), default=4)
    task_column = Column("task", no_wrap=True, min_width=longest)
    table = Table(task_column, "status", "mode", "step", "updated", "text", "answer")
    for s in states:
        answer = (
            "; ".join(_notes(s, unacked)) or ((s.result.answer or "") if s.result else (s.error or ""))[:60]
        )
        table.add_row(
            s.task_id,
            s.status,
            s.task.mode,
            str(s.step_seq),
            s.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
            s.task.text[:60],
            answer,
        )
    Console().print(table if states else "no tasks yet")


def _notes(state: Any, unacked: dict[str, Any]) -> list[str]:
    """Why an unfinished task makes no progress: its message is held by a worker that has not
    acknowledged it (redelivered if that worker died), and/or no live worker serves its role."""
    from agents.messages import TERMINAL_STATUSES

    if state.status in TERMINAL_STATUSES:
        return []
    notes = [_waiting_note(unacked[state.task_id])] if state.task_id in unacked else []
    if state.waiting_for:
        notes.append(f"waiting for a worker of role {state.waiting_for}")
    return notes


def _waiting_note(unacked: Any) -> str:
    return (
        f"handed to {unacked.consumer}, not yet acknowledged: in progress, or redelivered "
        f"{unacked.ack_wait_s:g} s after delivery if its worker stopped"
    )


async def _resolve_task_id(records: Any, task_id: str) -> str:
    """`task_id` itself if it names a task, else the one task whose id starts with it.

    Raises:
        typer.Exit: (2) the prefix fits several tasks; the message lists some.
    """
    from bus.subjects import is_token

    if not is_token(task_id) or await records.get(task_id) is not None:
        return task_id
    matches = await records.ids_starting_with(task_id)
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise fail(f"task id prefix {task_id!r} fits {len(matches)} tasks ({shown}); give more of it", 2)
    return matches[0] if matches else task_id


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
