"""`codeloop trace TASK_ID [--json]`: a task's timeline from its events, as a tree or as JSON."""

import json
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail
from codeloop.cli.connection import Connection, JsonOpt, run_async
from codeloop.cli.option_groups import with_option_groups

if TYPE_CHECKING:
    from agents.messages import TaskState
    from bus.connection import Bus
    from bus.envelope import Envelope
    from codeloop.observe.timeline import ChainEntry


FIRST_EVENT_TIMEOUT_S = 2.0
"""A task's stored events arrive at once; this long without any means it has none."""


async def read_task_events(bus: "Bus", task_id: str) -> "list[Envelope]":
    """Every envelope stored on the task's event subjects so far, in stream order."""
    from bus import subjects
    from bus.envelope import parse_envelope
    from bus.errors import MalformedMessage
    from bus.stored import read_stored

    envelopes = []
    for msg in await read_stored(bus, subjects.task_events(task_id), quiet_s=FIRST_EVENT_TIMEOUT_S):
        try:
            envelopes.append(parse_envelope(msg.data))
        except MalformedMessage:
            pass
    return envelopes


def chain_entry(state: "TaskState", children: list[str]) -> "ChainEntry | None":
    """The task's place in its chain of continuations; None when it has none."""
    from codeloop.observe.timeline import ChainEntry

    continuation = state.task.continuation
    if continuation is None and not children:
        return None
    if continuation is None:
        return ChainEntry(continued_by=children)
    return ChainEntry(
        parent_task_id=continuation.parent_task_id,
        parent_ended=continuation.ended,
        ancestors=list(continuation.chain),
        instruction=continuation.instruction,
        continued_by=children,
    )


@with_option_groups
def trace(
    task_id: Annotated[
        str,
        typer.Argument(
            help="Task id printed by `codeloop submit` or `codeloop run` (a unique prefix will do)."
        ),
    ],
    *,
    connection: Connection,
    as_json: JsonOpt = False,
) -> None:
    """Show a task's timeline: each role's steps with their model calls and tool calls (durations,
    tokens, outcomes) and the plan's revisions, from the task's events; for a continued task, the
    task it continues and the chain before it, and the tasks that continue it."""
    from bus.connection import open_bus
    from codeloop.cli.task_ids import checked_id, find_task
    from codeloop.config.serve_note import client_bus_config
    from codeloop.observe.render import timeline_tree
    from codeloop.observe.timeline import build_timeline

    checked_id(task_id)

    async def main() -> "tuple[str, list[Envelope], TaskState | None, list[str]]":
        from agents.continuing import continued_by
        from agents.orchestrator.records import TaskRecords

        config = client_bus_config(**connection)
        async with open_bus(config) as bus:
            found = await find_task(bus, task_id)
            events = await read_task_events(bus, found.task_id)
            children = continued_by(found.task_id, await (await TaskRecords.open(bus)).all())
            return found.task_id, events, found.state, children

    full_id, envelopes, state, children = run_async(main)
    if not envelopes:
        raise fail(f"no events of task {full_id} yet (`codeloop status {full_id}` shows its record)")
    timeline = build_timeline(full_id, envelopes)
    if state is not None:
        timeline.configuration = {
            "mode": state.task.mode,
            "models": state.task.models.model_dump(mode="json"),
            "budgets": state.task.budgets.model_dump(mode="json"),
            "config_revision": state.config_revision,
            "principal": state.principal,
        }
        timeline.chain = chain_entry(state, children)
    if as_json:
        typer.echo(json.dumps(timeline.model_dump(mode="json")))
        return
    from rich.console import Console

    Console(soft_wrap=True).print(timeline_tree(timeline))


def register(app: typer.Typer) -> None:
    app.command()(trace)
