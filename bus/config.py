"""How to reach NATS: an existing server or cluster, or an embedded one started by this process.

A `BusConfig` is built once by the CLI (arguments, environment, token files) and passed down;
nothing in `bus/` reads the environment itself.
"""

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from layout import DEFAULT_HOME


class TlsConfig(BaseModel):
    """TLS material passed through to the NATS client unchanged."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    ca_file: Path | None = None
    """PEM bundle that signs the server certificates; None uses the system trust store."""
    cert_file: Path | None = None
    """Client certificate for mutual TLS."""
    key_file: Path | None = None
    """Private key of `cert_file`."""


class BusConfig(BaseModel):
    """Where the bus is and how this process joins it."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    servers: tuple[str, ...] = ()
    """NATS URLs of an existing server or cluster; empty means start an embedded server."""
    state_dir: Path = Path(DEFAULT_HOME).expanduser()
    """Embedded server's JetStream store and the `serve.json` note other commands read the URL from."""
    replicas: int = Field(default=1, ge=1, le=5)
    """Replicas of every stream and bucket: 1 on one server, 3 on a three-node cluster."""
    name: str = "codeloop"
    """Client name shown by the server's monitoring endpoints."""
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds_file: Path | None = None
    """NATS decentralised-auth credentials file (JWT + nkey seed)."""
    tls: TlsConfig | None = None
    """TLS options; None connects in plain text (fine on loopback)."""
    connect_timeout_s: float = 2.0
    """How long one connection attempt may take."""
    reconnect_attempts: int = 60
    """Reconnect attempts after a lost connection before the client gives up (2 s apart)."""

    @property
    def embedded(self) -> bool:
        """True when no server was given and `codeloop serve` must start one."""
        return not self.servers
