"""`codeloop run`: one task from submission to its end, with a live view and a final summary.

It runs against the local `codeloop serve` when one is running (or `--nats URL`), else on an
embedded bus of its own with every role in this process. The repository's working tree is
captured as a snapshot first: the agents work on scratch copies, and the checkout changes only
with `--apply`, only if it still is the tree the task started from.
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from codeloop.cli.common import fail
from codeloop.cli.connection import Connection, local_or_embedded_serve, run_async, setup_telemetry
from codeloop.cli.option_groups import with_option_groups
from codeloop.cli.task_options import ModeOpt, RepoOpt, TaskArg, TaskFlags, build_task
from codeloop.cli.task_view import LiveView, summary
from codeloop.config.task_options import TaskOptions

EXIT_CODES = {"done": 0, "diagnosed": 0, "handed_off": 3, "cancelled": 4, "failed": 1, "rejected": 1}


@with_option_groups
def run(
    task: TaskArg,
    repo: RepoOpt,
    mode: ModeOpt = "read",
    *,
    options: Annotated[TaskOptions, TaskFlags()],
    apply: Annotated[
        bool,
        typer.Option("--apply", help="Apply the finished patch to the checkout (only if it is unchanged)."),
    ] = False,
    connection: Connection,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result object as JSON on stdout.")
    ] = False,
) -> None:
    """Run one task to its end: plan, retrieve, code in a scratch workspace, verify, revise.

    Without a model (no --model, no CODELOOP_MODEL) the task runs in diagnose mode: real
    retrieval and a real test run of the unmodified tree, and a report of what a model would do.
    Exit codes: 0 done or diagnosed, 3 handed off, 4 cancelled, 1 failed, 2 usage errors.
    """
    submitted = build_task(task, repo, mode=mode, options=options)
    setup_telemetry("run")
    result, snapshot = run_async(lambda: _run_task(submitted, connection, quiet=as_json))
    if apply:
        _apply(result, repo, snapshot)
    if as_json:
        typer.echo(result.model_dump_json())
    else:
        summary(result)
    raise typer.Exit(EXIT_CODES.get(result.status, 1))


async def _run_task(task: Any, connection: Connection, *, quiet: bool) -> Any:
    from codeloop.wiring.roles import roles_for_choice

    async with local_or_embedded_serve(connection, roles=lambda: roles_for_choice(task.pipeline)) as config:
        return await submit_and_follow(config, task, quiet=quiet)


async def refuse_unserved(bus: Any, task: Any) -> None:
    """A usage error (exit 2) when the task's pipeline names a role nothing serves."""
    if task.pipeline is None:
        return
    from agents.orchestrator.pipeline import PipelineError, pipeline_for
    from codeloop.config.pipelines import check_served

    try:
        await check_served(bus, pipeline_for(task))
    except PipelineError as exc:
        raise fail(f"--pipeline: {exc}", 2) from None


async def submit_and_follow(config: Any, task: Any, *, quiet: bool) -> Any:
    """Submit `task` on the bus of `config` (its tree captured first, unless it has a snapshot)
    and follow it to its end with a live view; (its `TaskResult`, the snapshot)."""
    from agents.client import submit_task, watch_task
    from agents.messages import TaskResult
    from bus.connection import open_bus
    from codeloop.wiring.snapshots import capture_repository

    async with open_bus(config) as bus:
        await refuse_unserved(bus, task)
        view = LiveView(enabled=not quiet, bus=bus, ask=task.interactive and not quiet)
        snapshot = task.snapshot
        if snapshot is None:  # a replay resubmits a task with the snapshot it was captured with
            view.line("capturing the working tree")
            snapshot = await capture_repository(bus, Path(task.repo))
        task = task.model_copy(update={"snapshot": snapshot})
        envelope, _ = await submit_task(bus, task)
        view.line(f"task {envelope.task_id} submitted ({snapshot.files} files, mode {task.mode})")
        final = await watch_task(bus, envelope.task_id, view.on_event)
    view.close()
    return TaskResult.model_validate(final.payload), snapshot


def _apply(result: Any, repo: Path, snapshot: Any) -> None:
    """Write the patch into the checkout, only for a finished task and an unchanged checkout."""
    import anyio

    from agents.workspace import WorkspaceError, apply_to_checkout

    if result.status != "done" or not result.patch:
        typer.echo(
            f"not applied: the task is {result.status}" + ("" if result.patch else " with no patch"), err=True
        )
        return
    try:
        anyio.run(lambda: apply_to_checkout(repo, snapshot, result.patch))
    except WorkspaceError as exc:
        raise fail(str(exc)) from None
    typer.echo(f"applied the patch to {repo} ({len(result.files_changed)} files)", err=True)


def register(app: typer.Typer) -> None:
    """Add `codeloop run` to the root app."""
    app.command()(run)
