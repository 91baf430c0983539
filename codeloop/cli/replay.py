"""`codeloop replay TASK_ID`: a recorded task again, with its recorded model responses.

By default the tools run again, on fresh scratch workspaces of the task's snapshot, and every
observation that differs from the recording is reported as a divergence; `--recorded-tools`
replays the observations too (nothing executes; see `agents/replay/exact.py`). Like `run`, it talks
to the local `codeloop serve` (or `--nats URL`), else runs every role itself on an embedded bus —
over the state directory's own store, where the tasks of an earlier `codeloop serve` are.
"""

import json
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail
from codeloop.cli.connection import Connection, local_or_embedded_serve, run_async
from codeloop.cli.option_groups import with_option_groups
from codeloop.cli.run import EXIT_CODES, submit_and_follow
from codeloop.cli.task_view import summary

if TYPE_CHECKING:
    from agents.messages import TaskResult
    from agents.replay.model import Divergence
    from bus.config import BusConfig


@with_option_groups
def replay(
    task_id: Annotated[
        str,
        typer.Argument(help="The recorded task to replay (see `codeloop status`; a unique prefix will do)."),
    ],
    recorded_tools: Annotated[
        bool, typer.Option("--recorded-tools", help="Replay the tool observations too: no tool executes.")
    ] = False,
    *,
    connection: Connection,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the replayed result with its divergences as JSON.")
    ] = False,
) -> None:
    """Re-run a recorded task with its recorded model responses and report what diverged.

    Exit codes: as `run`'s for the replayed task (0 done or diagnosed, 3 handed off, 4 cancelled,
    1 failed), 1 when the task or its recording is missing, 2 usage errors.
    """
    from agents.replay.errors import ReplayError

    try:
        result, divergences = run_async(
            lambda: _replay_on_serve(connection, task_id, recorded_tools, quiet=as_json)
        )
    except ReplayError as exc:
        raise fail(str(exc)) from None
    if as_json:
        from agents.replay.session import replayed_result

        typer.echo(json.dumps(replayed_result(result, divergences)))
    else:
        summary(result)
        _divergences(divergences, recorded_tools=recorded_tools)
    raise typer.Exit(EXIT_CODES.get(result.status, 1))


async def _replay_on_serve(
    connection: Connection, task_id: str, recorded_tools: bool, *, quiet: bool
) -> "tuple[TaskResult, list[Divergence]]":
    """The replay on the local serve, else on one in this process over the state directory's own
    store: the recorded task is there."""
    from codeloop.wiring.roles import SERVED_BY_DEFAULT

    async with local_or_embedded_serve(
        connection, roles=lambda: SERVED_BY_DEFAULT, store="state_dir"
    ) as config:
        return await _replay(config, task_id, recorded_tools, quiet=quiet)


async def _replay(
    config: "BusConfig", task_id: str, recorded_tools: bool, *, quiet: bool
) -> "tuple[TaskResult, list[Divergence]]":
    from agents.replay.exact import exact_replay
    from agents.replay.session import divergences_of, replay_submission
    from bus.connection import open_bus
    from codeloop.cli.task_ids import find_task

    async with open_bus(config) as bus:
        task_id = (await find_task(bus, task_id)).task_id
        if recorded_tools:
            return await exact_replay(bus, task_id)
        submission = await replay_submission(bus, task_id)
    result, _ = await submit_and_follow(config, submission, quiet=quiet)
    async with open_bus(config) as bus:
        return result, await divergences_of(bus, result.task_id)


def _divergences(divergences: "list[Divergence]", *, recorded_tools: bool) -> None:
    typer.echo("")
    if not divergences:
        typer.echo(
            "replay: every observation matched the recording"
            if not recorded_tools
            else "replay: every recorded run replayed exactly"
        )
        return
    typer.echo(f"replay: {len(divergences)} divergence(s)")
    for d in divergences:
        where = f"step {d.step_id} ({d.role})" + (f", request {d.request}" if d.request else "")
        call = f", {d.tool} {d.tool_call_id}" if d.tool else ""
        typer.echo(f"  {where}{call}: {d.what}")
        if d.recorded or d.replayed:
            typer.echo(f"    recorded: {d.recorded}")
            typer.echo(f"    replayed: {d.replayed}")


def register(app: typer.Typer) -> None:
    app.command()(replay)
