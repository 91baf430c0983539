"""What every command that talks to the bus shares: the NATS connection options, the runner that
turns expected failures into a message and an exit code, and the tracing set-up.

nats and the bus runtime are imported inside the functions so `codeloop --help` stays fast.
"""

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from codeloop.commands._common import fail

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


def _telemetry(process: str) -> None:
    """Tracing as the environment asks (`codeloop.telemetry`); nothing when it asks for none."""
    from codeloop.config import telemetry_config
    from codeloop.telemetry import setup_telemetry

    setup_telemetry(telemetry_config(), process=process)
