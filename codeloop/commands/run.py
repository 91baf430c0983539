"""`codeloop run`: one task from submission to its end, with a live view and a final summary.

It runs against the local `codeloop serve` when one is running (or `--nats URL`), else on an
embedded bus of its own with every role in this process. The repository's working tree is
captured as a snapshot first: the agents work on scratch copies, and the checkout changes only
with `--apply`, only if it still is the tree the task started from.
"""

import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from codeloop.commands._common import fail
from codeloop.commands.connection import Connection, _run, _telemetry, with_connection_options
from codeloop.commands.task_options import (
    CoderModelOpt,
    CostBudgetOpt,
    MaxRevisionsOpt,
    MaxStepsOpt,
    ModelOpt,
    ModeOpt,
    PipelineOpt,
    PlannerModelOpt,
    RepoOpt,
    TaskArg,
    TimeoutOpt,
    TokenBudgetOpt,
    build_task,
)

EXIT_CODES = {"done": 0, "diagnosed": 0, "handed_off": 3, "cancelled": 4, "failed": 1, "rejected": 1}


@with_connection_options
def run(
    task: TaskArg,
    repo: RepoOpt,
    mode: ModeOpt = "read",
    model: ModelOpt = None,
    planner_model: PlannerModelOpt = None,
    coder_model: CoderModelOpt = None,
    max_steps: MaxStepsOpt = None,
    max_revisions: MaxRevisionsOpt = None,
    timeout: TimeoutOpt = None,
    token_budget: TokenBudgetOpt = None,
    cost_budget: CostBudgetOpt = None,
    pipeline: PipelineOpt = None,
    apply: Annotated[
        bool,
        typer.Option("--apply", help="Apply the finished patch to the checkout (only if it is unchanged)."),
    ] = False,
    connection: Connection = None,  # type: ignore[assignment]
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result object as JSON on stdout.")
    ] = False,
) -> None:
    """Run one task to its end: plan, retrieve, code in a scratch workspace, verify, revise.

    Without a model (no --model, no CODELOOP_MODEL) the task runs in diagnose mode: real
    retrieval and a real test run of the unmodified tree, and a report of what a model would do.
    Exit codes: 0 done or diagnosed, 3 handed off, 4 cancelled, 1 failed, 2 usage errors.
    """
    submitted = build_task(
        task,
        repo,
        mode=mode,
        model=model,
        planner_model=planner_model,
        coder_model=coder_model,
        max_steps=max_steps,
        max_revisions=max_revisions,
        timeout=timeout,
        token_budget=token_budget,
        cost_budget=cost_budget,
        pipeline=pipeline,
    )
    _telemetry("run")
    result, snapshot = _run(lambda: _run_task(submitted, connection, quiet=as_json))
    if apply:
        _apply(result, repo, snapshot)
    if as_json:
        typer.echo(result.model_dump_json())
    else:
        _summary(result)
    raise typer.Exit(EXIT_CODES.get(result.status, 1))


async def _run_task(task: Any, connection: Connection, *, quiet: bool) -> Any:
    return await on_pipeline(
        connection, lambda config: _submit_and_follow(config, task, quiet=quiet), pipeline=task.pipeline
    )


async def on_pipeline(
    connection: Connection,
    body: Any,
    *,
    keep_store: bool = False,
    pipeline: Any = None,
    roles: tuple[str, ...] | None = None,
) -> Any:
    """`await body(client_bus_config)` against the local serve (or `--nats URL`) when there is one,
    else on an embedded bus with every role in this process, stopped when `body` returns; with
    `pipeline` (a `PipelineChoice`), the embedded bus also runs the installed roles it names;
    `roles` replaces that choice with its own list.

    The embedded bus keeps its store in a temporary directory unless `keep_store`: then it opens
    the state directory's own store, the one `codeloop serve` uses, with its task records."""
    import anyio

    from codeloop.config import (
        ConfigError,
        bus_config,
        client_bus_config,
        client_config_for,
        tool_server_config,
    )
    from codeloop.wiring import DEFAULT_ROLES, serve

    try:
        config = client_bus_config(**connection)
    except ConfigError:
        config = None
    if config is not None:
        return await body(config)
    # No serve to talk to: an embedded bus (its store in a temp dir) and every role in this process;
    # scratch workspaces and the search index stay in the state dir, so a second run reuses the index.
    home = bus_config(**connection).state_dir
    with tempfile.TemporaryDirectory(prefix="codeloop-run-") as store:
        embedded = bus_config(**{**connection, "state_dir": home if keep_store else Path(store)})
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            note = await tg.start(
                lambda task_status: serve(
                    embedded,
                    stop=stop,
                    home=home,
                    tool_config=tool_server_config(),
                    task_status=task_status,
                    roles=roles or _roles_for(DEFAULT_ROLES, pipeline),
                )
            )
            client = client_config_for(embedded, note)
            try:
                return await body(client)
            finally:
                stop.set()


def _roles_for(base: tuple[str, ...], choice: Any) -> tuple[str, ...]:
    if choice is None:
        return base
    from agents.orchestrator.pipeline import parse_pipeline
    from agents.runtime.plugins import load_roles
    from codeloop.pipelines import serving_roles

    return serving_roles(base, parse_pipeline(choice.name, choice.stages), load_roles())


async def refuse_unserved(bus: Any, task: Any) -> None:
    """A usage error (exit 2) when the task's pipeline names a role nothing serves."""
    if task.pipeline is None:
        return
    from agents.orchestrator.pipeline import PipelineError, pipeline_for
    from codeloop.pipelines import check_served

    try:
        await check_served(bus, pipeline_for(task))
    except PipelineError as exc:
        raise fail(f"--pipeline: {exc}", 2) from None


async def _submit_and_follow(config: Any, task: Any, *, quiet: bool) -> Any:
    from agents.client import submit_task, watch_task
    from agents.messages import TaskResult
    from agents.workspace import capture_snapshot
    from bus.connection import open_bus

    async with open_bus(config) as bus:
        await refuse_unserved(bus, task)
        view = _LiveView(enabled=not quiet, bus=bus, ask=task.interactive and not quiet)
        snapshot = task.snapshot
        if snapshot is None:  # a replay resubmits a task with the snapshot it was captured with
            view.line("capturing the working tree")
            snapshot = await capture_snapshot(bus, Path(task.repo))
        task = task.model_copy(update={"snapshot": snapshot})
        envelope, _ = await submit_task(bus, task)
        view.line(f"task {envelope.task_id} submitted ({snapshot.files} files, mode {task.mode})")
        final = await watch_task(bus, envelope.task_id, view.on_event)
    view.close()
    return TaskResult.model_validate(final.payload), snapshot


class _LiveView:
    """One status line on stderr: stage, step, last event, tokens, elapsed."""

    def __init__(self, *, enabled: bool, bus: Any = None, ask: bool = False) -> None:
        self.enabled = enabled
        self.bus = bus
        self.ask = ask
        self.started = time.monotonic()
        self.tokens = 0
        self.stage = "submitted"
        self.tty = sys.stderr.isatty()

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        out = f"[{elapsed:6.1f}s] {self.stage:<11} {self.tokens:>7} tok  {text}"
        if self.tty:
            sys.stderr.write("\r\033[K" + out[:160])
        else:
            sys.stderr.write(out + "\n")
        sys.stderr.flush()

    async def on_event(self, envelope: Any) -> None:
        payload = envelope.payload
        if envelope.kind == "event":
            data = payload.get("data") or {}
            if payload.get("name") == "confirmation_requested" and self.ask:
                await self._confirm(envelope.task_id, data)
                return
            if payload.get("name") == "transition" and data.get("status"):
                self.stage = data["status"]
            if payload.get("name") == "model_call":
                self.tokens += int(data.get("input_tokens", 0)) + int(data.get("output_tokens", 0))
            self.line(payload.get("message", "")[:110])
        elif envelope.kind == "dead_letter":
            self.line(f"dead letter: {payload.get('error', '')[:100]}")

    async def _confirm(self, task_id: str, data: dict) -> None:
        """Ask the person at this terminal; anything but yes is a refusal."""
        import anyio

        from agents.runtime.confirmations import answer

        question = data.get("question", "a high-risk action")
        reply = await anyio.to_thread.run_sync(
            lambda: _prompt(f"\n{question} [y/N] "), abandon_on_cancel=True
        )
        approved = reply.strip().lower() in ("y", "yes")
        await answer(self.bus, task_id, approve=approved, request_id=data.get("request_id"))

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")


def _prompt(question: str) -> str:
    try:
        return input(question)
    except EOFError:
        return ""


def _answer(task_id: str, request_id: str | None, connection: Connection, *, approve: bool) -> None:
    from agents.runtime.confirmations import answer
    from bus.connection import open_bus
    from codeloop.config import client_bus_config

    async def main() -> list[str]:
        async with open_bus(client_bus_config(**connection)) as bus:
            return await answer(bus, task_id, approve=approve, request_id=request_id)

    answered = _run(main)
    if not answered:
        raise fail(f"task {task_id} has no pending confirmation" + (f" {request_id}" if request_id else ""))
    typer.echo(f"{'approved' if approve else 'denied'}: {', '.join(answered)}")


@with_connection_options
def cancel(
    task_id: Annotated[str, typer.Argument(help="The task to stop.")],
    connection: Connection = None,  # type: ignore[assignment]
) -> None:
    """Stop a task: it ends `cancelled`; a step in flight finishes, but its result is ignored."""
    from agents.client import cancel_task
    from agents.orchestrator.records import TaskRecords
    from bus.connection import open_bus
    from codeloop.config import client_bus_config

    async def main() -> str | None:
        async with open_bus(client_bus_config(**connection)) as bus:
            state = await (await TaskRecords.open(bus)).get(task_id)
            if state is None:
                return None
            await cancel_task(bus, task_id)
            return state.status

    status = _run(main)
    if status is None:
        raise fail(f"no task {task_id!r} (see `codeloop status`)")
    typer.echo(f"cancel sent to task {task_id} (it was {status})")


RequestOpt = Annotated[
    str | None, typer.Option("--request", help="One request id (default: every pending one).")
]


@with_connection_options
def approve(
    task_id: Annotated[str, typer.Argument(help="The task whose pending confirmation to approve.")],
    request: RequestOpt = None,
    connection: Connection = None,  # type: ignore[assignment]
) -> None:
    """Approve a task's pending high-risk tool call (see its confirmation_requested event)."""
    _answer(task_id, request, connection, approve=True)


@with_connection_options
def deny(
    task_id: Annotated[str, typer.Argument(help="The task whose pending confirmation to deny.")],
    request: RequestOpt = None,
    connection: Connection = None,  # type: ignore[assignment]
) -> None:
    """Deny a task's pending high-risk tool call; unanswered requests are denied after a timeout."""
    _answer(task_id, request, connection, approve=False)


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


def _summary(result: Any) -> None:
    typer.echo(
        f"task {result.task_id}: {result.status}"
        + (f" ({result.failure_class})" if result.failure_class else "")
    )
    if result.files_changed:
        typer.echo("files changed: " + ", ".join(result.files_changed))
    verification = result.verification
    if verification.verdict:
        typer.echo(f"verification: {verification.verdict}")
        for check in verification.checks:
            typer.echo(
                f"  {'ok  ' if check.get('ok') else 'FAIL'} {check.get('name')}: {check.get('summary', '')}"
            )
        if verification.preexisting:
            typer.echo(
                "  failing before the patch too, not blamed: " + ", ".join(verification.preexisting[:10])
            )
    usage = result.usage
    cost = f", ${usage['cost_usd']:.4f}" if usage.get("cost_usd") is not None else ""
    typer.echo(
        f"usage: {usage.get('requests', 0)} model requests, {usage.get('input_tokens', 0)}+"
        f"{usage.get('output_tokens', 0)} tokens{cost}, {usage.get('wall_s', 0):.1f} s"
    )
    if result.report:
        typer.echo("")
        typer.echo(result.report)
    if result.answer and result.answer != result.report:
        typer.echo("")
        typer.echo(result.answer)
    if result.patch:
        typer.echo("")
        typer.echo(result.patch.rstrip())


def register(app: typer.Typer) -> None:
    for command in (run, approve, deny, cancel):
        app.command()(command)
