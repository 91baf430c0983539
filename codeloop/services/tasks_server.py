"""`codeloop mcp tasks`: the tasks MCP server on a bus it is given.

The bus comes from the caller as a context (`codeloop.wiring.embedded.embedded_serve` for the
command line): the serve `--nats URL` names or the state directory notes, else an embedded bus
with the orchestrator and every role in this process (the installed plug-in roles too, since any
client's task may name a pipeline that needs one), on the state directory's own store — so a
desktop client that launches the server over stdio gets a working agent with no other set-up,
and its tasks outlive a restart.

Over HTTP it can serve a health endpoint beside it (`codeloop.services.health`): live while its
loop runs, ready while it listens and its bus connection is up (not ready again while the bus is
away, so a load balancer or Kubernetes sends no client to a server that cannot submit).
"""

import signal
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from functools import partial

import anyio

from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.services.health import Readiness, serve_health
from codeloop.services.tasks_backend import DEFAULT_MAX_RUNNING, BusTasks
from tool_servers.protocol.audit import AuditLog
from tool_servers.protocol.http import TokenTable
from tool_servers.protocol.spec import ServerOptions
from tool_servers.serve import ServeConfig, serve_over
from tool_servers.tasks.server import build_tasks_server
from tool_servers.tasks.verify import PatchVerifier

BusSource = Callable[[], AbstractAsyncContextManager[BusConfig]]
"""Opens the bus to submit on, for as long as the server runs: a context yielding its client
configuration (`codeloop.cli.connection.local_or_embedded_serve`)."""


def tasks_options(config: ServeConfig) -> ServerOptions:
    """The server options `codeloop mcp` gives every server: grant, audit log, HTTP tokens.

    Raises:
        TokenFileError: the token file is unreadable or malformed.
    """
    tokens = TokenTable.from_file(config.token_file) if config.token_file is not None else None
    return ServerOptions(
        scopes=config.scopes, audit=AuditLog(config.audit_log), token_verifier=tokens, secrets=config.secrets
    )


async def run_tasks_server(
    config: ServeConfig,
    bus_source: BusSource,
    *,
    max_running: int = DEFAULT_MAX_RUNNING,
    check_credentials: bool = True,
    health: tuple[str, int] | None = None,
    verifier: PatchVerifier | None = None,
) -> None:
    """Serve the tasks server over `config`'s transport, on the bus `bus_source` opens, until
    stdin closes or it is cancelled.

    `health` (host, port): serve `/healthz` and `/readyz` there, ready with checks "listening"
    and "nats". `check_credentials=False`: submissions are not refused for a model key missing
    here (the workers on the remote bus hold it). `verifier`: serve `verify_patch` with it
    (`codeloop.wiring.judge.patch_verifier`).

    Raises:
        TokenFileError: the token file is unreadable or malformed.
        OSError: a port is taken.
    """
    options = tasks_options(config)  # before any bus starts: a bad token file fails at once
    readiness = Readiness()
    # Pending until the server listens: without it, the moment between the bus connecting and
    # the listener binding would read as ready (every check so far passing).
    readiness.add("listening", lambda: False)

    def listening(url: str) -> None:
        print(url, flush=True)
        print(f"serving at {url}", file=sys.stderr, flush=True)
        readiness.mark("listening")

    async def serve_on(client_config: BusConfig) -> None:
        async with open_bus(client_config) as bus:
            readiness.add("nats", lambda: bus.connected)
            backend = await BusTasks.open(bus, max_running=max_running, check_credentials=check_credentials)
            server = build_tasks_server(config.root.resolve(), options, backend, verifier=verifier)  # pyright: ignore[reportArgumentType] - BusTasks.changes is an async generator function, which the protocol's iterator describes
            await serve_over(server, config, on_ready=listening)

    async with anyio.create_task_group() as tg:
        if health is not None:
            # Up before the bus: a probe sees a live process that is not ready while it connects.
            host, port = health
            await tg.start(partial(serve_health, readiness, host=host, port=port))

        async def stop_on_signal() -> None:
            # SIGTERM would end the process on the spot, leaving an embedded nats-server behind:
            # cancel instead, so the bus and the roles stop as they do at the end of stdin.
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()

        tg.start_soon(stop_on_signal)
        async with bus_source() as client_config:
            await serve_on(client_config)
        tg.cancel_scope.cancel()
