"""`codeloop mcp tasks`: the tasks MCP server on a bus, and the bus it needs.

With `--nats URL`, or when a `codeloop serve` is running (its note in the state directory),
the server submits to that bus and the work happens wherever that bus's workers are. Otherwise
it starts what `codeloop run` starts: an embedded bus with the orchestrator and every role in
this process (the installed plug-in roles too, since any client's task may name a pipeline that
needs one), on the state directory's own store, so a desktop client that launches the server
over stdio gets a working agent with no other set-up, and its tasks outlive a restart.
"""

import signal
from typing import Any

import anyio

from bus.connection import open_bus
from codeloop.tasks_backend import DEFAULT_MAX_RUNNING, BusTasks
from tool_servers.protocol.audit import AuditLog
from tool_servers.protocol.http import TokenTable
from tool_servers.protocol.spec import ServerOptions
from tool_servers.serve import ServeConfig, serve_over
from tool_servers.tasks.server import build_tasks_server


def tasks_options(config: ServeConfig) -> ServerOptions:
    """The server options `codeloop mcp` gives every server: grant, audit log, HTTP tokens.

    Raises:
        TokenFileError: the token file is unreadable or malformed.
    """
    tokens = TokenTable.from_file(config.token_file) if config.token_file is not None else None
    return ServerOptions(
        scopes=config.scopes, audit=AuditLog(config.audit_log), token_verifier=tokens, secrets=config.secrets
    )


def embedded_roles() -> tuple[str, ...]:
    """What an embedded bus runs for the tasks server: the standard roles and every usable plug-in."""
    from agents.plugins import load_roles
    from codeloop.wiring import DEFAULT_ROLES

    plugins = [name for name in load_roles().roles if name not in DEFAULT_ROLES and name != "echo"]
    return (*DEFAULT_ROLES, *plugins)


async def run_tasks_server(
    config: ServeConfig, connection: dict[str, Any], *, max_running: int = DEFAULT_MAX_RUNNING
) -> None:
    """Serve the tasks server over `config`'s transport until stdin closes or it is cancelled."""
    from codeloop.commands.run import on_pipeline

    options = tasks_options(config)  # before any bus starts: a bad token file fails at once

    async def body(client_config: Any) -> None:
        async with open_bus(client_config) as bus:
            backend = await BusTasks.open(bus, max_running=max_running)
            await serve_over(build_tasks_server(config.root.resolve(), options, backend), config)

    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            # SIGTERM would end the process on the spot, leaving an embedded nats-server behind:
            # cancel instead, so the bus and the roles stop as they do at the end of stdin.
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()

        tg.start_soon(stop_on_signal)
        await on_pipeline(connection, body, keep_store=True, roles=embedded_roles())
        tg.cancel_scope.cancel()
