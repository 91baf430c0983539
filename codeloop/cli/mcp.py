"""`codeloop mcp SERVER ...`: run one tool server, or the tasks server.

The `mcp` command line is a contract other tools depend on:
`codeloop mcp SERVER --root DIR [--scopes read,write,execute] [--transport stdio|http]
[--host 127.0.0.1] [--port N] [--token-file FILE] [--audit-log FILE] [--index-dir DIR]
[--allow-path GLOB]... [--deny-path GLOB]... [--health-port N] [--health-host ADDR]`; the `tasks`
server also takes `--nats URL`, `--max-running N` and `--worker-credentials` (see
`codeloop.services.tasks_server`). The options come in typed groups (`codeloop.cli.mcp_options`).

Without `--scopes` the grant is `read` (least privilege), and what is granted is said on stderr
(stdout belongs to the MCP protocol over stdio). The audit log and the search index live in the
codeloop home, per root, so nothing is written under the root a client may only read.
"""

import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail, os_error_message, usage_error
from codeloop.cli.connection import local_or_embedded_serve, run_async, setup_telemetry
from codeloop.cli.env import environment_settings
from codeloop.cli.mcp_options import (
    TASKS,
    McpHealthOptions,
    SecretOptions,
    StateOptions,
    TasksServerOptions,
    TransportOptions,
)
from codeloop.cli.option_groups import with_option_groups
from layout import INDEX_DIR, ROOT_AUDIT

if TYPE_CHECKING:  # the servers' modules load when one is served, not for `--help`
    from tool_servers.serve import ServeConfig


@with_option_groups
def mcp(
    server: Annotated[
        str, typer.Argument(help="Server to run: fs, git, search, exec, or tasks (submit and follow tasks).")
    ],
    root: Annotated[Path, typer.Option("--root", help="Directory the server is confined to.")],
    scopes: Annotated[
        str | None,
        typer.Option(
            "--scopes", help="Granted scopes, comma-separated: read,write,execute. Default: read only."
        ),
    ] = None,
    *,
    transport: TransportOptions,
    state: StateOptions,
    secrets: SecretOptions,
    tasks: TasksServerOptions,
    health: McpHealthOptions,
) -> None:
    """Run one MCP tool server confined to ROOT, over stdio or streamable HTTP (at /mcp).

    Over HTTP the URL is printed on stdout once the server listens; every request needs a
    bearer token from --token-file. Tools outside --scopes are neither listed nor callable.

    `tasks` submits coding tasks and follows them (submit_task, wait_task, ...): on --nats, else
    on the local `codeloop serve`, else on a bus of its own with every role in this process; the
    grant bounds the mode of the tasks it accepts.
    """
    from tool_servers.protocol.scopes import format_scopes

    config = _serve_config(server, root, scopes, transport, state, secrets, tasks)
    endpoint = health.check(transport.transport)
    how = "the default; grant more with --scopes read,write,execute" if scopes is None else "--scopes"
    typer.echo(
        f"codeloop mcp {server}: root {root.resolve()}, granted {format_scopes(config.scopes)} "
        f"({how}); audit log {config.audit_log}",
        err=True,
    )
    _run(config, tasks, endpoint)


def _serve_config(
    server: str,
    root: Path,
    scopes: str | None,
    transport: TransportOptions,
    state: StateOptions,
    secrets: SecretOptions,
    tasks: TasksServerOptions,
) -> "ServeConfig":
    """The checked `ServeConfig` of the command line.

    Raises:
        typer.Exit: (2) the first problem: an unknown server, options of another server, a root
            that is no directory, bad scopes, a transport that does not fit.
    """
    from codeloop.config.environment import root_home, secret_rules, tool_server_config
    from codeloop.config.sandbox_limits import workspace_sandbox_limits, workspace_sandbox_policy
    from tool_servers.protocol.scopes import parse_scopes
    from tool_servers.serve import SERVERS, ServeConfig

    names = sorted([*SERVERS, TASKS])
    if server not in names:
        raise usage_error(f"unknown server {server!r}; choose one of: {', '.join(names)}")
    tasks.check(server)
    if not root.is_dir():
        raise usage_error(f"--root {root} is not a directory")
    try:
        granted = parse_scopes(scopes if scopes is not None else "read")
    except ValueError as exc:
        raise usage_error(f"--scopes: {exc}") from None
    transport.check()
    home = root_home(root)
    tools = tool_server_config()
    # The root's own `[environment]` and `[sandbox]` (and the user file's): the server process
    # reads no configuration.
    environment = environment_settings(root) if server in ("exec", "search") else None
    limits = workspace_sandbox_limits(root) if server == "exec" else None
    return ServeConfig(
        server=server,
        root=root,
        audit_log=state.audit_log or home / ROOT_AUDIT,
        scopes=granted,
        transport=transport.transport,  # type: ignore[arg-type] - transport was validated against the Transport literals above
        host=transport.host,
        port=transport.port,
        token_file=transport.token_file,
        index_dir=state.index_dir or (home / INDEX_DIR if server == "search" else None),
        secrets=secret_rules(allow=tuple(secrets.allow_path or ()), deny=tuple(secrets.deny_path or ())),
        sandbox_policy=workspace_sandbox_policy(root, tools.sandbox_policy),
        cache_root=tools.cache_dir,
        environment=environment,
        limits=limits,
    )


def _run(config: "ServeConfig", tasks: TasksServerOptions, health: tuple[str, int] | None) -> None:
    """Serve until the client goes (stdio) or the process is stopped, failures said in one line.

    Raises:
        typer.Exit: (2) a bad token file, (1) a server that cannot serve, (130) Ctrl-C.
    """
    import anyio

    from tool_servers.protocol.http import TokenFileError
    from tool_servers.serve import UnknownServer, run_server

    setup_telemetry(f"mcp {config.server}")
    try:
        if config.server == TASKS:
            _run_tasks(config, tasks, health=health)
        elif health is not None:
            anyio.run(_run_with_health, config, *health)
        else:
            anyio.run(run_server, config)
    except TokenFileError as exc:  # the file --token-file names
        raise usage_error(str(exc)) from None
    except UnknownServer as exc:  # a known name whose module this installation lacks
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except OSError as exc:  # the port is taken, the root or audit log cannot be opened
        raise fail(os_error_message(exc)) from None
    except ExceptionGroup as group:
        oserrors, rest = group.split(OSError)
        if rest is not None or oserrors is None:
            raise
        raise fail("; ".join(os_error_message(e) for e in _leaves(oserrors))) from None  # type: ignore[arg-type] - the leaves of an OSError group are OSErrors


def _run_tasks(config: "ServeConfig", tasks: TasksServerOptions, *, health: tuple[str, int] | None) -> None:
    """The tasks server on the serve `--nats` names or the local one, else on one started here
    with every role, over the state directory's own store (its tasks outlive a restart)."""
    from codeloop.config.environment import state_dir_from
    from codeloop.services.tasks_server import run_tasks_server
    from codeloop.wiring.judge import patch_verifier
    from codeloop.wiring.roles import every_role

    run_async(
        lambda: run_tasks_server(
            config,
            lambda: local_or_embedded_serve({"nats_url": tasks.nats}, roles=every_role, store="state_dir"),
            max_running=tasks.max_running,
            check_credentials=not tasks.worker_credentials,
            health=health,
            verifier=patch_verifier(state_dir_from(None)),
        )
    )


async def _run_with_health(config: object, host: str, port: int) -> None:
    """The HTTP server beside its health endpoint; ready once the server listens."""
    import anyio

    from codeloop.services.health import Readiness, serve_health
    from tool_servers.serve import run_server

    readiness = Readiness()

    def listening(url: str) -> None:
        print(url, flush=True)
        print(f"serving at {url}", file=sys.stderr, flush=True)
        readiness.mark("listening")

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(partial(serve_health, readiness, host=host, port=port))
            await run_server(config, on_ready=listening)  # type: ignore[arg-type] - run_server takes the narrower config type the branch above built
    except BaseExceptionGroup as group:
        # One cause (a bad token file, a taken port) is reported as it is without the endpoint.
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            raise group.exceptions[0] from None
        raise


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def register(app: typer.Typer) -> None:
    """Add `codeloop mcp` to the root app."""
    app.command("mcp")(mcp)
