"""`codeloop mcp SERVER ...` (run one tool server) and `codeloop audit verify FILE`.

The `mcp` command line is a contract other tools depend on:
`codeloop mcp SERVER --root DIR [--scopes read,write,execute] [--transport stdio|http]
[--host 127.0.0.1] [--port N] [--token-file FILE] [--audit-log FILE] [--index-dir DIR]
[--allow-path GLOB]... [--deny-path GLOB]... [--health-port N] [--health-host ADDR]`; the `tasks`
server also takes `--nats URL`, `--max-running N` and `--worker-credentials` (see
`codeloop.tasks_server`).

Without `--scopes` the grant is `read` (least privilege), and what is granted is said on stderr
(stdout belongs to the MCP protocol over stdio). The audit log and the search index live in the
codeloop home, per root, so nothing is written under the root a client may only read.
"""

import os
from pathlib import Path
from typing import Annotated

import typer

from codeloop.commands._common import fail, os_error_message, usage_error
from layout import INDEX_DIR, ROOT_AUDIT

TASKS = "tasks"
audit_app = typer.Typer(no_args_is_help=True, help="Inspect the tool servers' hash-chained audit log.")


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
    transport: Annotated[str, typer.Option("--transport", help="stdio (desktop clients) or http.")] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP port (0 picks a free one).")] = 8000,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="HTTP bearer tokens, one per line: TOKEN PRINCIPAL SCOPES. Required for http.",
        ),
    ] = None,
    audit_log: Annotated[
        Path | None,
        typer.Option(
            "--audit-log", help="Audit log file (default: CODELOOP_HOME/roots/<root>-<hash>/audit.jsonl)."
        ),
    ] = None,
    index_dir: Annotated[
        str | None,
        typer.Option(
            "--index-dir",
            help="search: index directory or LanceDB URI (default: CODELOOP_HOME/roots/<root>-<hash>/index; "
            "ROOT/.codeloop/index shares the one `codeloop index ROOT` builds).",
        ),
    ] = None,
    allow_path: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-path", help="Take files matching this glob off the secrets deny-list (repeatable)."
        ),
    ] = None,
    deny_path: Annotated[
        list[str] | None,
        typer.Option("--deny-path", help="Also treat files matching this glob as secrets (repeatable)."),
    ] = None,
    nats: Annotated[
        str | None,
        typer.Option(
            "--nats",
            help="tasks: NATS URL(s) to submit to (env CODELOOP_NATS_URL). Omitted: the local `codeloop "
            "serve`, else an embedded bus with every role in this process.",
        ),
    ] = None,
    max_running: Annotated[
        int,
        typer.Option(
            "--max-running", min=1, help="tasks: unfinished tasks one principal may have at a time."
        ),
    ] = 4,
    worker_credentials: Annotated[
        bool,
        typer.Option(
            "--worker-credentials",
            help="tasks on a remote bus (--nats or CODELOOP_NATS_URL): the workers hold the model keys, so "
            "a submission is not refused for a key missing here (model names and files are still checked).",
        ),
    ] = False,
    health_port: Annotated[
        int,
        typer.Option(
            "--health-port",
            help="http: serve liveness (/healthz) and readiness (/readyz: listening; tasks: and its bus "
            "connected) on this port. Default 0: off.",
        ),
    ] = 0,
    health_host: Annotated[
        str, typer.Option("--health-host", help="Address the health endpoint listens on.")
    ] = "127.0.0.1",
) -> None:
    """Run one MCP tool server confined to ROOT, over stdio or streamable HTTP (at /mcp).

    Over HTTP the URL is printed on stdout once the server listens; every request needs a
    bearer token from --token-file. Tools outside --scopes are neither listed nor callable.

    `tasks` submits coding tasks and follows them (submit_task, wait_task, ...): on --nats, else
    on the local `codeloop serve`, else on a bus of its own with every role in this process; the
    grant bounds the mode of the tasks it accepts.
    """
    import anyio

    from codeloop.config import root_home, secret_rules, tool_server_config
    from tool_servers.protocol.http import TokenFileError
    from tool_servers.protocol.scopes import format_scopes, parse_scopes
    from tool_servers.serve import SERVERS, ServeConfig, UnknownServer, run_server

    names = sorted([*SERVERS, TASKS])
    if server not in names:
        raise usage_error(f"unknown server {server!r}; choose one of: {', '.join(names)}")
    if server != TASKS and (nats is not None or max_running != 4 or worker_credentials):
        raise usage_error("--nats, --max-running and --worker-credentials belong to the tasks server only")
    if worker_credentials and nats is None and not os.environ.get("CODELOOP_NATS_URL"):
        raise usage_error(
            "--worker-credentials needs a remote bus (--nats URL or CODELOOP_NATS_URL): without one the "
            "workers run in this process, and the model keys must be here"
        )
    if not root.is_dir():
        raise usage_error(f"--root {root} is not a directory")
    try:
        granted = parse_scopes(scopes if scopes is not None else "read")
    except ValueError as exc:
        raise usage_error(f"--scopes: {exc}") from None
    if transport not in ("stdio", "http"):
        raise usage_error(f"--transport must be stdio or http, not {transport!r}")
    if transport == "http" and token_file is None:
        raise usage_error(
            "--transport http needs --token-file FILE (lines of 'TOKEN PRINCIPAL SCOPES'); unauthenticated HTTP is not offered"
        )
    if not 0 <= port <= 65535:
        raise usage_error(f"--port must be between 0 and 65535, not {port}")
    if not 0 <= health_port <= 65535:
        raise usage_error(f"--health-port must be between 0 and 65535, not {health_port}")
    if health_port and transport != "http":
        raise usage_error(
            "--health-port needs --transport http: a stdio server lives and dies with its client"
        )
    home = root_home(root)
    tools = tool_server_config()
    config = ServeConfig(
        server=server,
        root=root,
        audit_log=audit_log or home / ROOT_AUDIT,
        scopes=granted,
        transport=transport,  # type: ignore[arg-type]
        host=host,
        port=port,
        token_file=token_file,
        index_dir=index_dir or (home / INDEX_DIR if server == "search" else None),
        secrets=secret_rules(allow=tuple(allow_path or ()), deny=tuple(deny_path or ())),
        sandbox_policy=tools.sandbox_policy,
        cache_root=tools.cache_dir,
    )
    how = "the default; grant more with --scopes read,write,execute" if scopes is None else "--scopes"
    typer.echo(
        f"codeloop mcp {server}: root {root.resolve()}, granted {format_scopes(granted)} "
        f"({how}); audit log {config.audit_log}",
        err=True,
    )
    from codeloop.config import telemetry_config
    from codeloop.telemetry import setup_telemetry

    setup_telemetry(telemetry_config(), process=f"mcp {server}")
    try:
        if server == TASKS:
            health = (health_host, health_port) if health_port else None
            _run_tasks(config, nats, max_running, check_credentials=not worker_credentials, health=health)
        elif health_port:
            anyio.run(_run_with_health, config, health_host, health_port)
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
        raise fail("; ".join(os_error_message(e) for e in _leaves(oserrors))) from None  # type: ignore[arg-type]


def _run_tasks(
    config: object,
    nats: str | None,
    max_running: int,
    *,
    check_credentials: bool,
    health: tuple[str, int] | None,
) -> None:
    from codeloop.commands.connection import _run
    from codeloop.tasks_server import run_tasks_server

    _run(
        lambda: run_tasks_server(
            config,  # type: ignore[arg-type]
            {"nats_url": nats},
            max_running=max_running,
            check_credentials=check_credentials,
            health=health,
        )
    )


async def _run_with_health(config: object, host: str, port: int) -> None:
    """The HTTP server beside its health endpoint; ready once the server listens."""
    import sys
    from functools import partial

    import anyio

    from codeloop.health import Readiness, serve_health
    from tool_servers.serve import run_server

    readiness = Readiness()

    def listening(url: str) -> None:
        print(url, flush=True)
        print(f"serving at {url}", file=sys.stderr, flush=True)
        readiness.mark("listening")

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(partial(serve_health, readiness, host=host, port=port))
            await run_server(config, on_ready=listening)  # type: ignore[arg-type]
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


@audit_app.command("verify")
def verify(
    file: Annotated[Path, typer.Argument(help="Audit log (JSONL) to check.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check the hash chain of an audit log: exits 1 if a record was edited, removed or reordered."""
    from tool_servers.protocol.audit import verify_log

    if not file.is_file():
        raise usage_error(f"{file} is not a file: pass the audit log (JSONL) of a tool server")
    try:
        report = verify_log(file)
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror or exc}") from None
    if json_output:
        typer.echo(report.model_dump_json())
    elif report.ok:
        typer.echo(f"ok: {report.records} records, chain intact")
    else:
        typer.echo(f"TAMPERED: chain broken after {report.records} good records", err=True)
        for problem in report.problems:
            typer.echo(f"  {problem}", err=True)
    raise typer.Exit(0 if report.ok else 1)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the root app."""
    app.command("mcp")(mcp)
    app.add_typer(audit_app, name="audit")
