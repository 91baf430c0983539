"""`codeloop run`: one task from submission to its end, with a live view and a final summary.

It runs against the local `codeloop serve` when one is running (or `--nats URL`), else on an
embedded bus of its own with every role in this process. The repository's working tree is
captured as a snapshot first: the agents work on scratch copies, and the checkout changes only
with `--apply`, only if it still is the tree the task started from.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.applying import ApplyOutcome, apply_result
from codeloop.cli.common import fail, plural, usage_error
from codeloop.cli.connection import (
    Connection,
    ServeFound,
    local_or_embedded_serve,
    run_async,
    setup_telemetry,
)
from codeloop.cli.option_groups import with_option_groups
from codeloop.cli.task_options import McpConfigOpt, ModeOpt, RepoOpt, TaskArg, TaskFlags, build_task
from codeloop.cli.task_view import LiveView, summary
from codeloop.config.task_options import TaskOptions

if TYPE_CHECKING:
    from agents.messages import TaskResult, TaskSubmitted
    from agents.workspace import SnapshotRef
    from bus.config import BusConfig
    from bus.connection import Bus

EXIT_CODES = {"done": 0, "diagnosed": 0, "handed_off": 3, "cancelled": 4, "failed": 1, "rejected": 1}


@with_option_groups
def run(
    task: TaskArg,
    repo: RepoOpt,
    mode: ModeOpt = "read",
    *,
    options: Annotated[TaskOptions, TaskFlags()],
    mcp_config: McpConfigOpt = None,
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
    if apply and mode == "read":
        raise usage_error(
            "--apply needs a patch, and read mode only answers: add --mode write (or execute) to change files"
        )
    submitted = build_task(task, repo, mode=mode, options=options, mcp_config=mcp_config)
    setup_telemetry("run")
    following = Following()
    try:
        result, snapshot = run_async(
            lambda: _run_task(submitted, connection, quiet=as_json, following=following)
        )
    except KeyboardInterrupt:
        raise fail(interrupted(following), 130) from None
    # Applied (or refused) before printing, so the output says what happened to the checkout; a
    # refusal still prints the result with its patch and names the file the patch was saved in.
    outcome = apply_result(result, repo, snapshot, state_dir=connection.get("state_dir")) if apply else None
    if as_json:
        typer.echo(result_json(result, outcome))
    else:
        summary(result)
    if outcome is not None and outcome.refused:
        raise fail(outcome.message)
    if outcome is not None:
        typer.echo(outcome.message, err=True)
    raise typer.Exit(EXIT_CODES.get(result.status, 1))


def result_json(result: "TaskResult", outcome: ApplyOutcome | None) -> str:
    """The contract's result object; with `--apply`, also what became of the patch (`apply`)."""
    if outcome is None:
        return result.model_dump_json()
    return json.dumps({**result.model_dump(mode="json"), "apply": outcome.model_dump(mode="json")})


@dataclass
class Following:
    """How far `codeloop run` got: what a Ctrl-C leaves behind."""

    serve: ServeFound = field(default_factory=ServeFound)
    task_id: str | None = None
    """Set once the task is submitted."""


def interrupted(following: Following) -> str:
    """What a Ctrl-C did to the task: nothing started, stopped with this process, or still running
    in a `codeloop serve` that outlives it (and how to follow or cancel it there)."""
    task_id = following.task_id
    if task_id is None:
        return "interrupted before the task was submitted; nothing was started"
    if following.serve.joined:
        return (
            f"interrupted; task {task_id} goes on in the running `codeloop serve`: "
            f"`codeloop watch {task_id}` follows it, `codeloop cancel {task_id}` stops it"
        )
    return f"interrupted; task {task_id} stopped with this process (it ran on a bus of its own)"


async def _run_task(
    task: "TaskSubmitted", connection: Connection, *, quiet: bool, following: Following
) -> "tuple[TaskResult, SnapshotRef]":
    from codeloop.wiring.roles import roles_for_task

    async with local_or_embedded_serve(
        connection, roles=lambda: roles_for_task(task), where=following.serve
    ) as config:
        return await submit_and_follow(config, task, quiet=quiet, following=following)


async def refuse_unserved(bus: "Bus", task: "TaskSubmitted") -> None:
    """A usage error (exit 2) when the task's pipeline names a role nothing serves."""
    if task.pipeline is None and task.budgets.attempts == 1:
        return
    from agents.orchestrator.pipeline import PipelineError, pipeline_for
    from codeloop.config.pipelines import check_served

    try:
        await check_served(bus, pipeline_for(task))
    except PipelineError as exc:
        raise fail(f"--pipeline: {exc}", 2) from None


async def refuse_over_quota(bus: "Bus", task: "TaskSubmitted") -> None:
    """Exit 1 (`quota.exceeded`) when the task's principal is over a quota of the configuration
    center: what was used, the limit, when it resets and the key that raises it."""
    from agents.quotas import LOCAL_PRINCIPAL
    from codeloop.services.center_watch import quota_breach

    found = await quota_breach(bus, task.principal or LOCAL_PRINCIPAL)
    if found is not None:
        raise fail(f"refused (quota.exceeded): {found.describe()}; nothing was submitted")


async def submit_and_follow(
    config: "BusConfig", task: "TaskSubmitted", *, quiet: bool, following: Following | None = None
) -> "tuple[TaskResult, SnapshotRef]":
    """Submit `task` on the bus of `config` (its tree captured first, unless it has a snapshot)
    and follow it to its end with a live view; (its `TaskResult`, the snapshot). `following`
    learns the task's id once it is submitted."""
    from agents.client import submit_task, watch_task
    from agents.messages import TaskResult
    from agents.workspace.manifest import CACHE_SKIP_REASON, ENVIRONMENT_SKIP_REASON
    from bus.connection import open_bus
    from codeloop.snapshots import capture_repository

    async with open_bus(config) as bus:
        await refuse_unserved(bus, task)
        await refuse_over_quota(bus, task)
        view = LiveView(enabled=not quiet, bus=bus, ask=task.interactive and not quiet)
        snapshot = task.snapshot
        if snapshot is None:  # a replay resubmits a task with the snapshot it was captured with
            view.line("capturing the working tree")
            snapshot = await capture_repository(bus, Path(task.repo))
            for left_out in snapshot.skipped:
                if left_out.reason in (ENVIRONMENT_SKIP_REASON, CACHE_SKIP_REASON):
                    view.note(f"{left_out.path}/ is not in the snapshot: {left_out.reason}")
        task = task.model_copy(update={"snapshot": snapshot})
        envelope, _ = await submit_task(bus, task)
        if following is not None:
            following.task_id = envelope.task_id
        view.line(f"task {envelope.task_id} submitted ({plural(snapshot.files, 'file')}, mode {task.mode})")
        final = await watch_task(bus, envelope.task_id, view.on_event)
    view.close()
    return TaskResult.model_validate(final.payload), snapshot


def register(app: typer.Typer) -> None:
    """Add `codeloop run` to the root app."""
    app.command()(run)
