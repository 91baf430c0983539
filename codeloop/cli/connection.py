"""What every command that talks to the bus shares: the NATS connection options, the runner that
turns expected failures into a message and an exit code, and the tracing set-up.

nats, the bus runtime and the configuration are imported inside the functions: they take a
second to import, and `codeloop --help` should not wait for them. Only their small leaves are
imported here: the errors the runner translates, and the connection options' type. The types of
the rest are imported for the type checker alone (`TYPE_CHECKING`).
"""

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar, cast

import typer

from bus.errors import BusError, BusTimeout, NoResponders
from codeloop.cli.common import fail
from codeloop.cli.option_groups import KEYWORD
from codeloop.config.connection_options import ConnectionOptions
from codeloop.config.errors import ConfigError

if TYPE_CHECKING:
    from bus.config import BusConfig

T = TypeVar("T")

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


def run_async(main: Callable[[], Awaitable[T]]) -> T:
    """Run an async command, turning expected failures into a message and an exit code."""
    import anyio

    try:
        try:
            return anyio.run(main)
        except BaseExceptionGroup as group:
            # A crash inside a task group (e.g. a role that kept failing) arrives wrapped.
            raise _first_leaf(group) from group
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    except BusTimeout as exc:
        raise fail(
            f"the NATS server did not answer in time ({exc}); is it overloaded or unreachable?"
        ) from None
    except NoResponders as exc:
        raise fail(
            f"{exc}: the bus has no codeloop streams yet; start `codeloop serve` (or give --nats)"
        ) from None
    except BusError as exc:
        raise fail(str(exc)) from None


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


_CONNECTION_OPTIONS: dict[str, tuple[str, object]] = {
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


@dataclass(frozen=True)
class ConnectionFlags:
    """The nine NATS connection options, handed to the command as `bus_config` keywords (None: the
    environment or the default decides): the expansion behind `Connection`."""

    after: Mapping[str, str] = field(default_factory=dict)

    def parameters(self) -> list[inspect.Parameter]:
        return [
            inspect.Parameter(name, KEYWORD, default=None, annotation=annotation)
            for name, (_, annotation) in _CONNECTION_OPTIONS.items()
        ]

    def build(self, values: Mapping[str, object]) -> ConnectionOptions:
        # typer parsed each value with the annotation `_CONNECTION_OPTIONS` gives its option.
        return cast(
            ConnectionOptions, {keyword: values[name] for name, (keyword, _) in _CONNECTION_OPTIONS.items()}
        )


Connection = Annotated[ConnectionOptions, ConnectionFlags()]
"""A command's NATS connection options as `bus_config` keywords; a parameter of this type is
expanded into the options by `codeloop.cli.option_groups.with_option_groups`."""


@asynccontextmanager
async def local_or_embedded_serve(
    connection: ConnectionOptions,
    *,
    roles: Callable[[], tuple[str, ...]],
    store: Literal["state_dir", "temporary"] = "temporary",
    where: "ServeFound | None" = None,
) -> AsyncIterator["BusConfig"]:
    """The bus a command works on (`codeloop.wiring.embedded.embedded_serve`): the serve
    `connection` names or the local one noted, else a serve in this process running `roles()`
    (called only then) with the environment's tool settings, stopped when the block ends. Yields
    the client's `BusConfig`; `store` is where a serve started here keeps its streams; `where`, when
    given, learns which of the two it is (what a Ctrl-C leaves running)."""
    from codeloop.config.environment import bus_config, tool_server_config
    from codeloop.wiring.embedded import embedded_serve
    from codeloop.wiring.process import RoleSetup, Workers

    async with embedded_serve(
        bus_config(**connection),
        store=store,
        workers=lambda: Workers(roles=roles()),
        setup=RoleSetup(tool_config=tool_server_config()),
    ) as serve:
        if where is not None:
            where.joined = serve.note is None
        yield serve.config


@dataclass
class ServeFound:
    """Whether a command joined a serve that outlives it (`joined`) or started one of its own."""

    joined: bool | None = None
    """None until the serve is found or started."""


def setup_telemetry(process: str) -> None:
    """Tracing as the environment asks (`codeloop.wiring.telemetry`); nothing when it asks for none."""
    from codeloop.config.environment import telemetry_config
    from codeloop.wiring.telemetry import setup_telemetry as install

    install(telemetry_config(), process=process)
