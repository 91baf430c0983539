"""`codeloop serve | submit | watch | status | schema`: run the bus (and host the tool servers), talk to it.

nats, the bus runtime and the agents are imported inside the commands so `codeloop --help` stays fast.
"""

import functools
import inspect
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from codeloop.commands._common import fail, os_error_message
from codeloop.commands.task_options import (
    CoderModelOpt,
    MaxRevisionsOpt,
    MaxStepsOpt,
    ModelOpt,
    ModeOpt,
    PlannerModelOpt,
    RepoOpt,
    TaskArg,
    TimeoutOpt,
    TokenBudgetOpt,
)

NatsOpt = Annotated[
    str | None,
    typer.Option(
        "--nats",
        help="NATS URL(s) of an existing server or cluster, comma-separated (env CODELOOP_NATS_URL). "
        "serve: omitted = start an embedded server. Other commands: omitted = the URL the local serve noted.",
    ),
]
StateOpt = Annotated[
    Path | None,
    typer.Option("--state-dir", help="State directory (env CODELOOP_HOME, default ~/.codeloop)."),
]
CredsOpt = Annotated[
    Path | None, typer.Option("--creds", help="NATS credentials file (env CODELOOP_NATS_CREDS).")
]
UserOpt = Annotated[str | None, typer.Option("--user", help="NATS user (env CODELOOP_NATS_USER).")]
PasswordOpt = Annotated[
    str | None, typer.Option("--password", help="NATS password (env CODELOOP_NATS_PASSWORD).")
]
TokenOpt = Annotated[str | None, typer.Option("--token", help="NATS token (env CODELOOP_NATS_TOKEN).")]
TlsCaOpt = Annotated[
    Path | None, typer.Option("--tls-ca", help="CA bundle for the server's TLS certificate.")
]
TlsCertOpt = Annotated[Path | None, typer.Option("--tls-cert", help="Client certificate for mutual TLS.")]
TlsKeyOpt = Annotated[Path | None, typer.Option("--tls-key", help="Key of --tls-cert.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


def _run(main: Any) -> Any:
    """Run an async command, turning expected failures into a message and an exit code."""
    import anyio

    from bus.errors import BusError
    from codeloop.config import ConfigError

    try:
        try:
            return anyio.run(main)
        except BaseExceptionGroup as group:
            # A crash inside a task group (e.g. a role that kept failing) arrives wrapped.
            raise _first_leaf(group) from group
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    except BusError as exc:
        raise fail(f"{exc} ({type(exc).__name__})") from None


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


Connection = dict[str, Any]
"""A command's NATS connection options as `bus_config` keywords (None: environment or default)."""

_CONNECTION_OPTIONS: dict[str, tuple[str, Any]] = {
    # CLI parameter: (bus_config keyword, its typer annotation)
    "nats": ("nats_url", NatsOpt),
    "state_dir": ("state_dir", StateOpt),
    "creds": ("creds", CredsOpt),
    "user": ("user", UserOpt),
    "password": ("password", PasswordOpt),
    "token": ("token", TokenOpt),
    "tls_ca": ("tls_ca", TlsCaOpt),
    "tls_cert": ("tls_cert", TlsCertOpt),
    "tls_key": ("tls_key", TlsKeyOpt),
}


def with_connection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` with the nine NATS connection options in place of its `connection: Connection`
    parameter, handed to it as one `Connection` (typer has no option groups)."""
    signature = inspect.signature(command)
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        if parameter.name != "connection":
            parameters.append(parameter)
            continue
        parameters += [
            inspect.Parameter(
                name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=annotation
            )
            for name, (_, annotation) in _CONNECTION_OPTIONS.items()
        ]

    @functools.wraps(command)
    def cli_command(**options: Any) -> Any:
        connection = {keyword: options.pop(name) for name, (keyword, _) in _CONNECTION_OPTIONS.items()}
        return command(connection=connection, **options)

    cli_command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return cli_command


@with_connection_options
def serve(
    connection: Connection = None,  # type: ignore[assignment]
    role: Annotated[
        list[str] | None,
        typer.Option(
            "--role",
            help="Role to run in this process (repeatable). Default: orchestrator, planner, retriever, "
            "coder, verifier (with --pipeline echo: orchestrator, echo).",
        ),
    ] = None,
    pipeline: Annotated[
        str | None,
        typer.Option(
            "--pipeline",
            help="Run every task through this pipeline (fix, explain, diagnose, echo). Default (auto): by the "
            "task (diagnose without a model, explain in read mode, else fix).",
        ),
    ] = None,
    ack_wait: Annotated[
        float | None,
        typer.Option(
            "--ack-wait",
            min=0.5,
            help="Seconds a worker may hold a message without a heartbeat before it goes to another "
            "worker (default 30): shorter recovers faster from a dead worker.",
        ),
    ] = None,
    replicas: Annotated[
        int,
        typer.Option("--replicas", min=1, max=5, help="Stream replicas: 1 on one server, 3 on a cluster."),
    ] = 1,
    mcp: Annotated[
        bool,
        typer.Option("--mcp/--no-mcp", help="Also host the fs, git, search and exec tool servers over HTTP."),
    ] = True,
    mcp_root: Annotated[
        Path | None,
        typer.Option("--mcp-root", help="Directory the hosted tool servers are confined to. Default: here."),
    ] = None,
    mcp_host: Annotated[
        str, typer.Option("--mcp-host", help="Address the tool servers listen on (each on a free port).")
    ] = "127.0.0.1",
    mcp_scopes: Annotated[
        str,
        typer.Option(
            "--mcp-scopes",
            help="Scopes granted to the hosted tool servers and their token, comma-separated. "
            "Default read (look, never change); add write to edit files and commit to codeloop/* "
            "branches, execute to run commands and tests in the sandbox: --mcp-scopes read,write,execute.",
        ),
    ] = "read",
    metrics: Annotated[
        bool, typer.Option("--metrics/--no-metrics", help="Serve Prometheus metrics at http://HOST:PORT/metrics.")
    ] = True,
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", min=0, max=65535, help="Port of the metrics endpoint (0: a free one).")
    ] = 0,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address the metrics endpoint listens on.")
    ] = "127.0.0.1",
    as_json: Annotated[
        bool,
        typer.Option("--json", help="When ready, print what runs as one JSON line (serve.json's content)."),
    ] = False,
    tools_stdio: Annotated[
        str | None,
        typer.Option(
            "--tools-stdio",
            help="Run these tool servers of this process's workers (fs, git) as `codeloop mcp` "
            "subprocesses over stdio instead of in process, comma-separated.",
        ),
    ] = None,
) -> None:
    """Run NATS (embedded unless --nats), the actors of this process and the MCP tool servers until Ctrl-C.

    Tool servers fs, git, search, exec: streamable HTTP at http://HOST:PORT/mcp (free ports).

    They are confined to --mcp-root and granted --mcp-scopes (default read).

    A fresh bearer token goes to STATE_DIR/mcp-tokens (mode 0600) at every start.

    URLs and token file are printed and recorded in STATE_DIR/serve.json.

    Each tool call goes to STATE_DIR/mcp-audit.jsonl and is a `tool_call` event on the bus.

    Prometheus metrics: http://127.0.0.1:PORT/metrics (printed; also in serve.json).
    """
    import anyio

    from codeloop.config import ConfigError, bus_config, secret_rules, tool_server_config
    from codeloop.wiring import DEFAULT_ROLES, KNOWN_ROLES, McpHosting, MetricsServing, UnknownRole
    from codeloop.wiring import serve as run_serve
    from tool_servers.scopes import parse_scopes

    try:
        config = bus_config(
            replicas=replicas,
            **connection,
        )
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    from agents.orchestrator import NAMED
    from bus.actor import DeliveryPolicy

    if pipeline is not None and pipeline != "auto" and pipeline not in NAMED:
        raise fail(f"--pipeline {pipeline!r}: choose auto or one of {', '.join(NAMED)}", 2)
    chosen = NAMED[pipeline] if pipeline and pipeline != "auto" else None
    roles = tuple(role or (("orchestrator", "echo") if pipeline == "echo" else DEFAULT_ROLES))
    # Checked before anything starts: a bad role or replica count used to surface only after
    # the embedded server was up and its state directory written.
    unknown = [name for name in roles if name not in KNOWN_ROLES]
    if unknown:
        raise fail(f"--role: unknown role {unknown[0]!r}; known roles: {', '.join(KNOWN_ROLES)}", 2)
    if config.embedded and replicas > 1:
        raise fail(
            f"--replicas {replicas} needs a cluster of at least {replicas} servers: the embedded "
            "server is one; pass --nats with the cluster's URLs, or --replicas 1",
            2,
        )
    hosting = None
    if mcp:
        root = (mcp_root or Path.cwd()).expanduser()
        if not root.is_dir():
            raise fail(f"--mcp-root {root} is not a directory (or pass --no-mcp)", 2)
        try:
            scopes = parse_scopes(mcp_scopes)
        except ValueError as exc:
            raise fail(f"--mcp-scopes: {exc}", 2) from None
        if not scopes:
            raise fail("--mcp-scopes grants nothing; give at least read (or pass --no-mcp)", 2)
        hosting = McpHosting(root=root.resolve(), scopes=scopes, host=mcp_host, secrets=secret_rules())

    tool_config = tool_server_config()
    tools = _tools(tools_stdio, config.state_dir, tool_config)
    _telemetry("serve")

    def show(note: Any) -> None:
        if as_json:
            typer.echo(note.model_dump_json())
            sys.stdout.flush()
            return
        where = "embedded nats-server" if note.embedded else "existing NATS"
        typer.echo(f"codeloop is running (pid {note.pid})")
        typer.echo(f"  NATS       {note.nats_url}  ({where})")
        typer.echo(f"  state dir  {note.state_dir}  (other commands find the URL in serve.json there)")
        typer.echo(f"  roles      {', '.join(note.roles)}")
        typer.echo("  bus        streams CODELOOP_TASKS, CODELOOP_WORK, CODELOOP_EVENTS; KV codeloop-tasks;")
        typer.echo("             object store codeloop-artifacts")
        if note.mcp is not None:
            _show_mcp(note.mcp)
        if note.metrics_url:
            typer.echo(f"  metrics    {note.metrics_url}  (Prometheus)")
        typer.echo("  try        codeloop submit 'hello' --repo .   then   codeloop watch TASK_ID")
        typer.echo("Press Ctrl-C to stop.")
        sys.stdout.flush()

    async def main() -> None:
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def on_signals() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        if stop.is_set():
                            tg.cancel_scope.cancel()  # second Ctrl-C: stop now
                        typer.echo("stopping: finishing in-flight work (Ctrl-C again to stop now)", err=True)
                        stop.set()

            tg.start_soon(on_signals)
            policy = DeliveryPolicy(ack_wait_s=ack_wait) if ack_wait else None
            await run_serve(
                config, roles=roles, pipeline=chosen, actor_policy=policy, stop=stop, mcp=hosting, on_ready=show,
                metrics=MetricsServing(host=metrics_host, port=metrics_port) if metrics else None,
                tools=tools, tool_config=tool_config,
            )  # fmt: skip
            tg.cancel_scope.cancel()
        typer.echo("codeloop stopped", err=True)

    try:
        _run(main)
    except UnknownRole as exc:
        raise fail(str(exc), 2) from None
    except OSError as exc:
        if exc.filename is None and hosting is not None:  # a tool server or the metrics could not listen
            raise fail(
                f"cannot listen (tool servers on {mcp_host}, metrics on {metrics_host}:{metrics_port}): {exc}"
            ) from None
        raise fail(f"cannot serve: {os_error_message(exc)}") from None


def _tools(stdio: str | None, state_dir: Path, config: Any) -> Any:
    """The workers' tool provider: in process (`serve`'s default, None here), or with
    `--tools-stdio` servers in subprocesses; `config` is the environment's `ToolServerConfig`."""
    if not stdio:
        return None
    from codeloop.tool_provider import StdioTools

    try:
        names = frozenset(n.strip() for n in stdio.split(",") if n.strip())
        return StdioTools(stdio=names, audit_log=state_dir / "mcp-audit-stdio.jsonl", config=config)
    except ValueError as exc:
        raise fail(f"--tools-stdio: {exc}", 2) from None


def _telemetry(process: str) -> None:
    """Tracing as the environment asks (`codeloop.telemetry`); nothing when it asks for none."""
    from codeloop.config import telemetry_config
    from codeloop.telemetry import setup_telemetry

    setup_telemetry(telemetry_config(), process=process)


def _show_mcp(mcp: Any) -> None:
    """The hosted tool servers: URLs, token file, and how a client uses them."""
    typer.echo(f"  MCP        tool servers over streamable HTTP, confined to {mcp.root}")
    typer.echo(f"             scopes {','.join(mcp.scopes)} (more: --mcp-scopes read,write,execute)")
    for name, url in mcp.urls.items():
        typer.echo(f"             {name:<7} {url}")
    for name, reason in mcp.unavailable.items():
        typer.echo(f"             {name:<7} not hosted: {reason}")
    typer.echo(
        f"  token      {mcp.token_file}  (mode 0600, new at every start; line: TOKEN PRINCIPAL SCOPES)"
    )
    typer.echo("             send it as the header  Authorization: Bearer $TOKEN  e.g.")
    typer.echo(f"             TOKEN=$(awk '!/^#/ {{print $1}}' {mcp.token_file})")
    example = next(iter(mcp.urls.values()), "http://127.0.0.1:PORT/mcp")
    typer.echo(
        f'             client config: {{"url": "{example}", "headers": {{"Authorization": "Bearer TOKEN"}}}}'
    )
    typer.echo(f"  audit      {mcp.audit_log}  (each call also a tool_call event on codeloop.events.>)")


@with_connection_options
def submit(
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
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="Your own task id (resubmits are ignored).")
    ] = None,
    connection: Connection = None,  # type: ignore[assignment]
    as_json: JsonOpt = False,
) -> None:
    """Submit a task (its working tree captured first); prints its id: follow it with `codeloop watch ID`."""
    from agents.client import submit_task
    from agents.workspace import WorkspaceError, capture_snapshot
    from bus.connection import open_bus
    from codeloop.commands.task_options import build_task
    from codeloop.config import client_bus_config

    payload = build_task(
        task, repo, mode=mode, model=model, planner_model=planner_model, coder_model=coder_model,
        max_steps=max_steps, max_revisions=max_revisions, timeout=timeout, token_budget=token_budget,
        task_id=task_id,
    ).model_copy(update={"interactive": False})  # fmt: skip

    async def main() -> None:
        config = client_bus_config(**connection)
        async with open_bus(config) as bus:
            try:
                snapshot = await capture_snapshot(bus, Path(payload.repo))
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

    _run(main)


@with_connection_options
def watch(
    task_id: Annotated[str, typer.Argument(help="Task id printed by `codeloop submit`.")],
    connection: Connection = None,  # type: ignore[assignment]
    as_json: JsonOpt = False,
) -> None:
    """Print a task's events as they happen, from its first, until the task ends."""
    from agents.client import watch_task
    from agents.records import TaskRecords
    from bus.connection import open_bus
    from codeloop.config import client_bus_config
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
        status = _run(main)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    from codeloop.commands.run import EXIT_CODES

    raise typer.Exit(EXIT_CODES.get(status or "", 1))


@with_connection_options
def status(
    task_id: Annotated[str | None, typer.Argument(help="One task; omitted = all tasks.")] = None,
    connection: Connection = None,  # type: ignore[assignment]
    as_json: JsonOpt = False,
) -> None:
    """Show the record of one task, or a table of all tasks."""
    from agents.messages import TERMINAL_STATUSES
    from agents.records import TaskRecords
    from bus.connection import open_bus
    from bus.inflight import unacked_tasks
    from codeloop.config import client_bus_config

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

    states, unacked = _run(main)
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
            if s.task_id in unacked and s.status not in TERMINAL_STATUSES:
                typer.echo(f"{s.task_id}: {_waiting_note(unacked[s.task_id])}", err=True)
        return
    from rich.console import Console
    from rich.table import Column, Table

    # Ids are never cut (a cut id cannot be pasted into `watch`); text and answer give way.
    longest = max((len(s.task_id) for s in states), default=4)
    task_column = Column("task", no_wrap=True, min_width=longest)
    table = Table(task_column, "status", "mode", "step", "updated", "text", "answer")
    for s in states:
        answer = ((s.result.answer or "") if s.result else (s.error or ""))[:60]
        if s.task_id in unacked and s.status not in TERMINAL_STATUSES:
            answer = _waiting_note(unacked[s.task_id])
        table.add_row(
            s.task_id, s.status, s.task.mode, str(s.step_seq), s.updated_at.strftime("%Y-%m-%d %H:%M:%S"),
            s.task.text[:60], answer,
        )  # fmt: skip
    Console().print(table if states else "no tasks yet")


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
    import agents.echo
    import agents.messages  # noqa: F401
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
    import os
    import tempfile

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
    for command in (serve, submit, watch, status, schema):
        app.command()(command)
