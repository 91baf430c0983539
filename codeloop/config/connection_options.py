"""The NATS connection options a command is given, as `bus_config`'s keyword arguments.

A `TypedDict`, not a model: every command hands them on unchanged (`bus_config(**options)`,
`client_bus_config(**options)`), and the type checker matches each key with its keyword. This
module imports nothing of the bus, so the command line can name the type before `--help` prints.
"""

from pathlib import Path
from typing import TypedDict


class ConnectionOptions(TypedDict, total=False):
    """The nine NATS options of the command line (each command is given all nine); one left out
    or None leaves the environment or the default to decide (`codeloop.config.environment.bus_config`)."""

    nats_url: str | None
    """NATS URL(s), comma-separated (`--nats`)."""
    state_dir: Path | None
    """The state directory (`--state-dir`)."""
    creds: Path | None
    """NATS credentials file (`--creds`)."""
    user: str | None
    password: str | None
    token: str | None
    tls_ca: Path | None
    """CA bundle for the server's TLS certificate (`--tls-ca`)."""
    tls_cert: Path | None
    """Client certificate for mutual TLS (`--tls-cert`)."""
    tls_key: Path | None
    """Key of `tls_cert` (`--tls-key`)."""
