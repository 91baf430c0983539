"""`codeloop continue TASK_ID [TEXT]`: an ended task goes on as a new task linked to it.

The new task starts where the old one stopped — the same snapshot, the old patch in its workspace,
the old plan, an account of what was tried and what the verifier said — with fresh budgets and the
new instruction, if one is given; it is followed to its end like `codeloop run`, and `--apply`
writes the combined patch into the checkout (only if the checkout is still the tree the first task
of the chain started from). What is inherited is said in `agents/continuing.py`; the call itself
is `codeloop.continuing.continue_task`, which the tasks server and the console make too.
"""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.applying import apply_result
from codeloop.cli.common import fail, read_text_argument, usage_error
from codeloop.cli.connection import Connection, local_or_embedded_serve, run_async, setup_telemetry
from codeloop.cli.option_groups import with_option_groups
from codeloop.cli.run import EXIT_CODES, Following, interrupted, result_json, submit_and_follow
from codeloop.cli.task_options import TaskFlags
from codeloop.cli.task_view import summary
from codeloop.config.task_options import TaskOptions

if TYPE_CHECKING:
    from agents.messages import TaskResult, TaskState, TaskSubmitted
    from bus.connection import Bus


CONTINUE_OPTIONS = (
    "model",
    "planner_model",
    "coder_model",
    "max_steps",
    "max_revisions",
    "timeout",
    "token_budget",
    "cost_budget",
    "require_verified",
)
"""The task options `continue` takes: models and budgets (the pipeline stays the parent's)."""
CONTINUE_HELP = {
    "model": "Model of every LLM role; default: the models the task ran with.",
    "max_steps": "Model requests of the new task, all roles together (fresh: the old task's do not count).",
}


@with_option_groups
def continue_(
    task_id: Annotated[
        str,
        typer.Argument(help="The ended task to continue (see `codeloop status`; a unique prefix will do)."),
    ],
    text: Annotated[
        str | None,
        typer.Argument(
            help="A new instruction, in words (@FILE for a file's text, - for stdin); omitted: go on "
            "with the same task."
        ),
    ] = None,
    *,
    options: Annotated[TaskOptions, TaskFlags(only=CONTINUE_OPTIONS, help=CONTINUE_HELP)],
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Apply the finished combined patch to the checkout (only if it is still the tree "
            "the first task started from).",
        ),
    ] = False,
    connection: Connection,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the new task's result object as JSON on stdout.")
    ] = False,
) -> None:
    """Continue an ended task (handed off, failed, cancelled or done) as a new task linked to it.

    The new task starts from the old one's patch, plan and an account of what it tried and what
    the verifier said, with fresh budgets and TEXT as a new instruction; its patch is the combined
    patch against the original starting tree. Exit codes as `run`: 0 done, 3 handed off,
    4 cancelled, 1 failed; 2 when the task is unknown, still running or the options are wrong.
    """
    from bus.validation import MAX_TASK_TEXT_BYTES
    from codeloop.cli.task_ids import checked_id

    checked_id(task_id)
    instruction = (
        read_text_argument(text, what="instruction", max_bytes=MAX_TASK_TEXT_BYTES)
        if text is not None
        else None
    )
    setup_telemetry("continue")
    following = Following()
    try:
        result, task = run_async(
            lambda: _continue(connection, task_id, instruction, options, quiet=as_json, following=following)
        )
    except KeyboardInterrupt:
        raise fail(interrupted(following), 130) from None
    outcome = None
    if apply:
        assert task.snapshot is not None, "a continuation starts from its parent's snapshot"
        outcome = apply_result(result, Path(task.repo), task.snapshot, state_dir=connection.get("state_dir"))
    if as_json:
        typer.echo(result_json(result, outcome))
    else:
        summary(result)
    if outcome is not None and outcome.refused:
        raise fail(outcome.message)
    if outcome is not None:
        typer.echo(outcome.message, err=True)
    raise typer.Exit(EXIT_CODES.get(result.status, 1))


async def _continue(
    connection: Connection,
    given: str,
    instruction: str | None,
    options: TaskOptions,
    *,
    quiet: bool,
    following: Following,
) -> "tuple[TaskResult, TaskSubmitted]":
    """The continued task's result and submission, on the local serve (or `--nats`), else on one
    in this process over the state directory's own store, where an earlier serve's tasks are."""

    from bus.connection import open_bus
    from codeloop.continuing import ContinueRefused, continuation_of
    from codeloop.wiring.roles import DEFAULT_ROLES

    async with local_or_embedded_serve(
        connection, roles=lambda: DEFAULT_ROLES, store="state_dir", where=following.serve
    ) as config:
        async with open_bus(config) as bus:
            parent = await _parent(bus, given, embedded=not following.serve.joined)
            try:
                task = continuation_of(
                    parent, text=instruction, options=options, interactive=sys.stdin.isatty()
                )
            except ContinueRefused as exc:
                raise usage_error(str(exc)) from None
        result, _ = await submit_and_follow(config, task, quiet=quiet, following=following)
        return result, task


async def _parent(bus: "Bus", given: str, *, embedded: bool) -> "TaskState":
    """The record of the task `given` names (its whole id or a unique prefix).

    Raises:
        typer.Exit: (2) no such task, or a prefix of several.
    """
    from codeloop.cli.task_ids import lookup_task

    found = await lookup_task(bus, given)
    if found is None:
        hint = (
            "; a task of a `codeloop run` without a running `codeloop serve` ends with it: start "
            "`codeloop serve` to keep tasks you may continue"
            if embedded
            else ""
        )
        raise usage_error(f"no task {given} to continue (`codeloop status` lists the tasks){hint}")
    assert found.state is not None, "lookup_task finds tasks by their records"
    return found.state


def register(app: typer.Typer) -> None:
    """Add `codeloop continue` to the root app."""
    app.command("continue")(continue_)
