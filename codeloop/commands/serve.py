"""`codeloop serve`: run the bus (embedded NATS unless --nats), this process's actors and the hosted tool servers.

nats, the bus runtime and the agents are imported inside the command so `codeloop --help` stays fast.
"""

import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from codeloop.commands._common import fail, os_error_message
from codeloop.commands.connection import Connection, _run, _telemetry, with_connection_options
from layout import MCP_AUDIT_STDIO


@with_connection_options
def serve(
    connection: Connection = None,  # type: ignore[assignment]
    role: Annotated[
        list[str] | None,
        typer.Option(
            "--role",
            help="Role to run in this process (repeatable): a built-in one or any installed plug-in role "
            "(`codeloop roles` lists them). Default: orchestrator, planner, retriever, coder, verifier, "
            "plus the installed roles --pipeline names (with --pipeline echo: orchestrator, echo).",
        ),
    ] = None,
    pipeline: Annotated[
        str | None,
        typer.Option(
            "--pipeline",
            help="Run every task that names no pipeline of its own through this one: a built-in one (fix, "
            "explain, diagnose, echo) or one codeloop.toml here declares under [pipelines]. Default (auto): "
            "by the task (diagnose without a model, explain in read mode, else fix).",
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
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            help="Requests each role's worker in this process handles at once (default 64). Lower it "
            "where a worker has a fixed share of a machine (a pod's CPU limit), so that the work "
            "spreads over more workers instead of queueing inside one.",
        ),
    ] = None,
    replicas: Annotated[
        int,
        typer.Option("--replicas", min=1, max=5, help="Stream replicas: 1 on one server, 3 on a cluster."),
    ] = 1,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp/--no-mcp",
            help="Also host the fs, git, search and exec tool servers and the tasks server over HTTP.",
        ),
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
        bool,
        typer.Option("--metrics/--no-metrics", help="Serve Prometheus metrics at http://HOST:PORT/metrics."),
    ] = True,
    metrics_port: Annotated[
        int,
        typer.Option(
            "--metrics-port", min=0, max=65535, help="Port of the metrics endpoint (0: a free one)."
        ),
    ] = 0,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address the metrics endpoint listens on.")
    ] = "127.0.0.1",
    health_port: Annotated[
        int,
        typer.Option(
            "--health-port",
            min=0,
            max=65535,
            help="Serve liveness (/healthz) and readiness (/readyz: actors running, NATS connected) "
            "over HTTP on this port, e.g. for Kubernetes probes. Default 0: off.",
        ),
    ] = 0,
    health_host: Annotated[
        str, typer.Option("--health-host", help="Address the health endpoint listens on (0.0.0.0 in a pod).")
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
    workspaces: Annotated[
        bool,
        typer.Option(
            "--workspaces",
            help="Run the workspace service: scratch workspaces of tasks' snapshots whose fs, git, search "
            "and exec tools it serves over HTTP MCP, one bearer token per workspace, to workers started "
            "with --workspace-service. It removes model-provider keys from its own environment first. "
            "No roles run here unless --role names some; the --mcp servers are not hosted.",
        ),
    ] = False,
    workspace_host: Annotated[
        str,
        typer.Option("--workspace-host", help="Address the workspace service listens on (0.0.0.0 in a pod)."),
    ] = "127.0.0.1",
    workspace_port: Annotated[
        int,
        typer.Option(
            "--workspace-port", min=0, max=65535, help="Port of the workspace service (0: a free one)."
        ),
    ] = 0,
    workspace_url: Annotated[
        str | None,
        typer.Option(
            "--workspace-url",
            help="Base URL workers reach the workspace service at, e.g. http://codeloop-workspaces:8700 "
            "(default: http://HOST:PORT of the listener).",
        ),
    ] = None,
    workspace_service: Annotated[
        bool,
        typer.Option(
            "--workspace-service",
            help="Make this process's coder work in workspaces of the workspace service (a "
            "`serve --workspaces` on the same bus), reaching their tools only over HTTP MCP, instead of "
            "in scratch copies here.",
        ),
    ] = False,
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
    """
    from functools import partial

    import anyio

    stripped: list[str] = []
    if workspaces:
        # First, before anything reads the environment or starts a child: this process runs
        # untrusted code's tools and must hold no model key.
        from codeloop.workspace_service import restart_without_provider_keys

        stripped = restart_without_provider_keys()

    from bus.discovery import SchemaMismatch
    from codeloop.config import ConfigError, bus_config, secret_rules, tool_server_config
    from codeloop.health import Readiness, serve_health
    from codeloop.wiring import DEFAULT_ROLES, McpHosting, MetricsServing, UnknownRole
    from codeloop.wiring import serve as run_serve
    from tool_servers.protocol.scopes import parse_scopes

    try:
        config = bus_config(
            replicas=replicas,
            **connection,
        )
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    from agents.orchestrator.pipeline import PipelineError
    from agents.runtime.plugins import load_roles
    from bus.actor import DeliveryPolicy
    from codeloop.pipelines import PipelineConfigError, resolve_pipeline, role_problems, serving_roles
    from codeloop.wiring import unknown_role_problem

    registry = load_roles()
    chosen = None
    if pipeline is not None and pipeline != "auto":
        try:
            chosen = resolve_pipeline(pipeline, Path.cwd())
        except (PipelineError, PipelineConfigError) as exc:
            raise fail(f"--pipeline: {exc}", 2) from None
    if role:
        roles = tuple(role)
    elif workspaces:
        roles = ()
    elif pipeline == "echo":
        roles = ("orchestrator", "echo")
    else:
        roles = serving_roles(DEFAULT_ROLES, chosen, registry)
    # Checked before anything starts: a bad role or replica count used to surface only after
    # the embedded server was up and its state directory written.
    problem = unknown_role_problem(roles, registry)
    if problem is not None:
        raise fail(f"--role: {problem}", 2)
    if chosen is not None and not role:
        missing = role_problems(chosen, registry)
        if missing:  # a foreign worker may still join: say so, do not refuse
            typer.echo(f"note: {'; '.join(missing)}; tasks wait for such a worker", err=True)
    for broken in registry.broken:
        typer.echo(
            f"warning: installed role {broken.name!r} ({broken.distribution}) is broken: {broken.reason}",
            err=True,
        )
    if config.embedded and replicas > 1:
        raise fail(
            f"--replicas {replicas} needs a cluster of at least {replicas} servers: the embedded "
            "server is one; pass --nats with the cluster's URLs, or --replicas 1",
            2,
        )
    if not workspaces and (workspace_url is not None or workspace_port or workspace_host != "127.0.0.1"):
        raise fail("--workspace-host, --workspace-port and --workspace-url configure --workspaces; add it", 2)
    if workspace_url is not None and not workspace_url.startswith(("http://", "https://")):
        raise fail(f"--workspace-url {workspace_url!r} is no http:// or https:// URL", 2)
    if workspace_service and "coder" not in roles and "verifier" not in roles:
        raise fail("--workspace-service is for a coder or verifier (--role coder or --role verifier)", 2)
    hosting = None
    if mcp and not workspaces:
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
    service_hosting = None
    if workspaces:
        from codeloop.workspace_service import WorkspaceHosting

        service_hosting = WorkspaceHosting(
            host=workspace_host, port=workspace_port, public_url=workspace_url, stripped_env=tuple(stripped)
        )
    remote = None
    if workspace_service:
        from agents.workspace.providers import RemoteWorkspaces

        remote = RemoteWorkspaces()
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
        if note.workspaces is not None:
            typer.echo(
                f"  workspaces {note.workspaces.url}/w/WORKSPACE/SERVER/mcp  (service {note.workspaces.service})"
            )
            typer.echo(f"             audit {note.workspaces.audit_log}")
            if note.workspaces.stripped_env:
                typer.echo(
                    f"             removed from its environment: {', '.join(note.workspaces.stripped_env)}"
                )
        if remote is not None:
            typer.echo("  workspaces the coder's are the workspace service's (--workspace-service)")
        if note.metrics_url:
            typer.echo(f"  metrics    {note.metrics_url}  (Prometheus)")
        if health_port:
            typer.echo(f"  health     http://{health_host}:{health_port}/healthz  and  /readyz")
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
            readiness = Readiness()
            if health_port:
                # Before the bus: a probe finds the process live (not ready) while it connects.
                await tg.start(partial(serve_health, readiness, host=health_host, port=health_port))
            given = {"ack_wait_s": ack_wait, "concurrency": concurrency}
            policy = (
                DeliveryPolicy(**{k: v for k, v in given.items() if v is not None})
                if any(given.values())
                else None
            )
            await run_serve(
                config,
                roles=roles,
                pipeline=chosen,
                actor_policy=policy,
                stop=stop,
                mcp=hosting,
                on_ready=show,
                metrics=MetricsServing(host=metrics_host, port=metrics_port) if metrics else None,
                tools=tools,
                tool_config=tool_config,
                readiness=readiness,
                workspace_service=service_hosting,
                workspaces=remote,
            )
            tg.cancel_scope.cancel()
        typer.echo("codeloop stopped", err=True)

    try:
        _run(main)
    except (UnknownRole, SchemaMismatch) as exc:
        raise fail(str(exc), 2) from None
    except OSError as exc:
        if exc.filename is None and (hosting is not None or health_port):  # a server could not listen
            health = f", health on {health_host}:{health_port}" if health_port else ""
            raise fail(
                f"cannot listen (tool servers on {mcp_host}, metrics on {metrics_host}:{metrics_port}{health}): {exc}"
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
        return StdioTools(stdio=names, audit_log=state_dir / MCP_AUDIT_STDIO, config=config)
    except ValueError as exc:
        raise fail(f"--tools-stdio: {exc}", 2) from None


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


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.command()(serve)
