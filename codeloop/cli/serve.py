"""`codeloop serve`: run the bus (embedded NATS unless --nats), this process's actors and the hosted tool servers.

Its options come in typed groups (`codeloop.cli.serve_options`), each checked once before
anything starts; the process itself is `codeloop.wiring.process.serve`. nats, the bus runtime
and the agents are imported inside the command so `codeloop --help` stays fast.
"""

import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail, os_error_message
from codeloop.cli.connection import Connection, run_async, setup_telemetry
from codeloop.cli.console_options import ConsoleOptions
from codeloop.cli.option_groups import with_option_groups
from codeloop.cli.serve_options import (
    HealthOptions,
    McpOptions,
    MetricsOptions,
    RoleOptions,
    WorkspaceOptions,
)
from codeloop.config.connection_options import ConnectionOptions
from codeloop.config.errors import ConfigError
from codeloop.services.provider_keys import restart_without_provider_keys
from layout import MCP_AUDIT_STDIO

if TYPE_CHECKING:
    from bus.config import BusConfig
    from codeloop.config.environment import ToolServerConfig
    from codeloop.config.serve_note import ConsoleNote, McpNote, ServeNote
    from codeloop.wiring.process import Hosting, RoleSetup, Workers
    from codeloop.wiring.tools import StdioTools

ReplicasOpt = Annotated[
    int, typer.Option("--replicas", min=1, max=5, help="Stream replicas: 1 on one server, 3 on a cluster.")
]
JsonReadyOpt = Annotated[
    bool, typer.Option("--json", help="When ready, print what runs as one JSON line (serve.json's content).")
]
ToolsStdioOpt = Annotated[
    str | None,
    typer.Option(
        "--tools-stdio",
        help="Run these tool servers of this process's workers (fs, git) as `codeloop mcp` "
        "subprocesses over stdio instead of in process, comma-separated.",
    ),
]


@dataclass(frozen=True)
class _Plan:
    """Everything `serve` checked before starting: what `codeloop.wiring.process.serve` takes."""

    config: "BusConfig"
    workers: "Workers"
    setup: "RoleSetup"
    hosting: "Hosting"
    listeners: str
    """Where its servers listen, for the message about one that could not."""
    listens: bool
    """True when it serves the tool servers or the health endpoint (a port that may be taken)."""


@with_option_groups
def serve(
    *,
    connection: Connection,
    roles: RoleOptions,
    replicas: ReplicasOpt = 1,
    mcp: McpOptions,
    metrics: MetricsOptions,
    health: HealthOptions,
    as_json: JsonReadyOpt = False,
    tools_stdio: ToolsStdioOpt = None,
    workspaces: WorkspaceOptions,
    console: ConsoleOptions,
) -> None:
    """Run NATS (embedded unless --nats), the actors of this process and the MCP tool servers until Ctrl-C.

    Tool servers fs, git, search, exec and the tasks server (MCP clients submit and follow
    tasks on this bus): streamable HTTP at http://HOST:PORT/mcp (free ports).

    They are confined to --mcp-root and granted --mcp-scopes (default read).

    A fresh bearer token goes to STATE_DIR/mcp-tokens (mode 0600) at every start.

    URLs and token file are printed and recorded in STATE_DIR/serve.json.

    Each tool call goes to STATE_DIR/mcp-audit.jsonl and is a `tool_call` event on the bus.

    Prometheus metrics: http://127.0.0.1:PORT/metrics (printed; also in serve.json).

    With --health-port: GET /healthz (live) and /readyz (ready) on that port.

    The web console: http://127.0.0.1:PORT/ (printed; `codeloop console` prints it with its token).
    """
    stripped: list[str] = []
    if workspaces.workspaces:
        # First, before anything reads the environment or starts a child: this process runs
        # untrusted code's tools and must hold no model key.

        stripped = restart_without_provider_keys()
    plan = _plan(
        connection, roles, replicas, (mcp, console), metrics, health, workspaces, tools_stdio, stripped
    )
    setup_telemetry("serve")
    remote = plan.setup.workspaces is not None
    _run(plan, health, show=lambda note: _show(note, as_json=as_json, health=health, remote=remote))


def _plan(
    connection: ConnectionOptions,
    roles: RoleOptions,
    replicas: int,
    hosted_options: tuple[McpOptions, ConsoleOptions],
    metrics: MetricsOptions,
    health: HealthOptions,
    workspaces: WorkspaceOptions,
    tools_stdio: str | None,
    stripped: list[str],
) -> _Plan:
    """Every option checked, in the order a user fixes them, before anything starts.

    Raises:
        typer.Exit: (2) the first problem, said on stderr.
    """
    from codeloop.config.environment import bus_config, tool_server_config
    from codeloop.services.health import Readiness
    from codeloop.wiring.process import Hosting, RoleSetup

    mcp, console = hosted_options
    try:
        config = bus_config(**connection).model_copy(update={"replicas": replicas})
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    workers = roles.workers(workspace_service_only=workspaces.workspaces)
    if config.embedded and replicas > 1:
        raise fail(
            f"--replicas {replicas} needs a cluster of at least {replicas} servers: the embedded "
            "server is one; pass --nats with the cluster's URLs, or --replicas 1",
            2,
        )
    workspaces.check(workers.roles)
    hosted = mcp.hosting(workspace_service_only=workspaces.workspaces)
    tool_config = tool_server_config()
    service = workspaces.hosting(stripped)
    remote = workspaces.remote()
    setup = RoleSetup(
        tools=_tools(tools_stdio, config.state_dir, tool_config), tool_config=tool_config, workspaces=remote
    )
    web = console.hosting(
        root=mcp.mcp_root, scopes=mcp.mcp_scopes, workspace_service_only=workspaces.workspaces
    )
    hosting = Hosting(
        mcp=hosted, metrics=metrics.serving(), readiness=Readiness(), workspace_service=service, console=web
    )
    at_health = f", health on {health.health_host}:{health.health_port}" if health.health_port else ""
    return _Plan(
        config=config,
        workers=workers,
        setup=setup,
        hosting=hosting,
        listeners=f"tool servers on {mcp.mcp_host}, metrics on {metrics.metrics_host}:{metrics.metrics_port}"
        f"{at_health}, console on {console.console_host}:{console.console_port}",
        listens=hosted is not None or bool(health.health_port) or web is not None,
    )


def _run(plan: _Plan, health: HealthOptions, *, show: "Callable[[ServeNote], None]") -> None:
    """Serve `plan` until Ctrl-C (twice: at once) or SIGTERM, the health endpoint up first.

    Raises:
        typer.Exit: (2) a role or bus that does not fit, (1) a port that cannot be bound or
            another failure to serve.
    """
    import anyio

    from bus.discovery import SchemaMismatch
    from codeloop.console.access import AccessFileError
    from codeloop.console.assets import MissingAsset
    from codeloop.services.health import serve_health
    from codeloop.wiring.process import serve as serve_process
    from codeloop.wiring.roles import UnknownRole

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
            if health.health_port:
                # Before the bus: a probe finds the process live (not ready) while it connects.
                await tg.start(
                    partial(
                        serve_health,
                        plan.hosting.readiness,  # pyright: ignore[reportArgumentType] - a plan with a health port always has its readiness
                        host=health.health_host,
                        port=health.health_port,
                    )
                )
            await serve_process(
                plan.config,
                stop=stop,
                workers=plan.workers,
                setup=plan.setup,
                hosting=plan.hosting,
                on_ready=show,
            )
            tg.cancel_scope.cancel()
        typer.echo("codeloop stopped", err=True)

    try:
        run_async(main)
    except (UnknownRole, SchemaMismatch) as exc:
        raise fail(str(exc), 2) from None
    except (AccessFileError, MissingAsset) as exc:
        raise fail(f"the web console cannot start: {exc}", 2) from None
    except OSError as exc:
        if exc.filename is None and plan.listens:  # a server could not listen
            raise fail(f"cannot listen ({plan.listeners}): {exc}") from None
        raise fail(f"cannot serve: {os_error_message(exc)}") from None


def _tools(stdio: str | None, state_dir: Path, config: "ToolServerConfig") -> "StdioTools | None":
    """The workers' tool provider: in process (`serve`'s default, None here), or with
    `--tools-stdio` servers in subprocesses; `config` is the environment's `ToolServerConfig`."""
    if not stdio:
        return None
    from codeloop.wiring.tools import StdioTools

    try:
        names = frozenset(n.strip() for n in stdio.split(",") if n.strip())
        return StdioTools(stdio=names, audit_log=state_dir / MCP_AUDIT_STDIO, config=config)
    except ValueError as exc:
        raise fail(f"--tools-stdio: {exc}", 2) from None


def _show(note: "ServeNote", *, as_json: bool, health: HealthOptions, remote: bool) -> None:
    """What runs, once it does: the note as one JSON line, or for a person."""
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
    if note.workspaces is not None:
        typer.echo(
            f"  workspaces {note.workspaces.url}/w/WORKSPACE/SERVER/mcp  (service {note.workspaces.service})"
        )
        typer.echo(f"             audit {note.workspaces.audit_log}")
        if note.workspaces.stripped_env:
            typer.echo(
                f"             removed from its environment: {', '.join(note.workspaces.stripped_env)}"
            )
    if remote:
        typer.echo("  workspaces the coder's are the workspace service's (--workspace-service)")
    if note.metrics_url:
        typer.echo(f"  metrics    {note.metrics_url}  (Prometheus)")
    if note.console is not None:
        _show_console(note.console)
    if health.health_port:
        typer.echo(f"  health     http://{health.health_host}:{health.health_port}/healthz  and  /readyz")
    typer.echo("  try        codeloop submit 'hello' --repo .   then   codeloop watch TASK_ID")
    typer.echo("Press Ctrl-C to stop.")
    sys.stdout.flush()


def _show_console(console: "ConsoleNote") -> None:
    """The console's address, with the generated token as Jupyter prints its own: the one line to open."""
    from codeloop.console.links import console_link

    typer.echo(f"  console    {console_link(console)}")
    if not console.generated:
        typer.echo(f"             sign in with ?token=YOUR_TOKEN (tokens in {console.token_file})")
    typer.echo("             `codeloop console` prints this again (--open opens it in a browser)")


def _show_mcp(mcp: "McpNote") -> None:
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


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.command()(serve)
