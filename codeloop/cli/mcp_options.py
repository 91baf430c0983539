"""`codeloop mcp`'s options in typed groups, each checked once (usage errors, exit 2) before the
server starts: the transport, where its state goes, the secrets rules, the tasks server's bus and
the health endpoint."""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from codeloop.cli.common import usage_error
from codeloop.cli.option_groups import OptionGroup

TASKS = "tasks"
DEFAULT_MAX_RUNNING = 4


@dataclass(frozen=True)
class TransportOptions(OptionGroup):
    """How clients reach the server."""

    transport: Annotated[str, typer.Option("--transport", help="stdio (desktop clients) or http.")] = "stdio"
    host: Annotated[str, typer.Option("--host", help="HTTP bind address.")] = "127.0.0.1"
    port: Annotated[int, typer.Option("--port", help="HTTP port (0 picks a free one).")] = 8000
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help="HTTP bearer tokens, one per line: TOKEN PRINCIPAL SCOPES. Required for http.",
        ),
    ] = None

    def check(self) -> None:
        """Raises: typer.Exit (2): an unknown transport, HTTP without tokens, a port out of range."""
        if self.transport not in ("stdio", "http"):
            raise usage_error(f"--transport must be stdio or http, not {self.transport!r}")
        if self.transport == "http" and self.token_file is None:
            raise usage_error(
                "--transport http needs --token-file FILE (lines of 'TOKEN PRINCIPAL SCOPES'); unauthenticated HTTP is not offered"
            )
        if not 0 <= self.port <= 65535:
            raise usage_error(f"--port must be between 0 and 65535, not {self.port}")


@dataclass(frozen=True)
class StateOptions(OptionGroup):
    """Where the server keeps what it writes (never under the root unless told to)."""

    audit_log: Annotated[
        Path | None,
        typer.Option(
            "--audit-log", help="Audit log file (default: CODELOOP_HOME/roots/<root>-<hash>/audit.jsonl)."
        ),
    ] = None
    index_dir: Annotated[
        str | None,
        typer.Option(
            "--index-dir",
            help="search: index directory or LanceDB URI (default: CODELOOP_HOME/roots/<root>-<hash>/index; "
            "ROOT/.codeloop/index shares the one `codeloop index ROOT` builds).",
        ),
    ] = None


@dataclass(frozen=True)
class SecretOptions(OptionGroup):
    """Changes to the secrets deny-list, on top of the environment's."""

    allow_path: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-path", help="Take files matching this glob off the secrets deny-list (repeatable)."
        ),
    ] = None
    deny_path: Annotated[
        list[str] | None,
        typer.Option("--deny-path", help="Also treat files matching this glob as secrets (repeatable)."),
    ] = None


@dataclass(frozen=True)
class TasksServerOptions(OptionGroup):
    """What only the tasks server takes: its bus, its cap, whose credentials."""

    nats: Annotated[
        str | None,
        typer.Option(
            "--nats",
            help="tasks: NATS URL(s) to submit to (env CODELOOP_NATS_URL). Omitted: the local `codeloop "
            "serve`, else an embedded bus with every role in this process.",
        ),
    ] = None
    max_running: Annotated[
        int,
        typer.Option(
            "--max-running", min=1, help="tasks: unfinished tasks one principal may have at a time."
        ),
    ] = DEFAULT_MAX_RUNNING
    worker_credentials: Annotated[
        bool,
        typer.Option(
            "--worker-credentials",
            help="tasks on a remote bus (--nats or CODELOOP_NATS_URL): the workers hold the model keys, so "
            "a submission is not refused for a key missing here (model names and files are still checked).",
        ),
    ] = False

    def check(self, server: str) -> None:
        """Raises: typer.Exit (2): these options on another server, or worker credentials without a remote bus."""
        given = self.nats is not None or self.max_running != DEFAULT_MAX_RUNNING or self.worker_credentials
        if server != TASKS and given:
            raise usage_error(
                "--nats, --max-running and --worker-credentials belong to the tasks server only"
            )
        if self.worker_credentials and self.nats is None and not os.environ.get("CODELOOP_NATS_URL"):
            raise usage_error(
                "--worker-credentials needs a remote bus (--nats URL or CODELOOP_NATS_URL): without one the "
                "workers run in this process, and the model keys must be here"
            )


@dataclass(frozen=True)
class McpHealthOptions(OptionGroup):
    """The health endpoint beside an HTTP server (off unless a port is given)."""

    health_port: Annotated[
        int,
        typer.Option(
            "--health-port",
            help="http: serve liveness (/healthz) and readiness (/readyz: listening; tasks: and its bus "
            "connected) on this port. Default 0: off.",
        ),
    ] = 0
    health_host: Annotated[
        str, typer.Option("--health-host", help="Address the health endpoint listens on.")
    ] = "127.0.0.1"

    def check(self, transport: str) -> tuple[str, int] | None:
        """(host, port) of the endpoint, None when off.

        Raises:
            typer.Exit: (2) a port out of range, or a health endpoint for a stdio server.
        """
        if not 0 <= self.health_port <= 65535:
            raise usage_error(f"--health-port must be between 0 and 65535, not {self.health_port}")
        if self.health_port and transport != "http":
            raise usage_error(
                "--health-port needs --transport http: a stdio server lives and dies with its client"
            )
        return (self.health_host, self.health_port) if self.health_port else None
