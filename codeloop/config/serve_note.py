"""What a running `codeloop serve` notes in its state directory, and how the other commands find it.

`serve` writes `serve.json` (`ServeNote`) once it is ready and removes it when it stops; `submit`,
`watch`, `status` and the embedded-or-local choice of `run` (`codeloop.wiring.embedded`) read it
to reach that serve's bus, with its embedded server's credentials.
"""

import json
import os
from pathlib import Path
from typing import Unpack

from pydantic import BaseModel, ConfigDict

from bus.config import BusConfig
from bus.credentials import CredentialsError, read_credentials
from codeloop.config.connection_options import ConnectionOptions
from codeloop.config.environment import bus_config
from codeloop.config.errors import ConfigError
from layout import SERVE_NOTE


class McpNote(BaseModel):
    """The tool servers a running `codeloop serve` hosts over streamable HTTP."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    root: str
    """Directory every hosted server is confined to (`--mcp-root`)."""
    scopes: list[str]
    """Scopes granted to the servers and to the generated token (`--mcp-scopes`)."""
    urls: dict[str, str]
    """Server name (`fs`, `git`, `search`, `exec`) -> its URL, `http://HOST:PORT/mcp`."""
    token_file: str
    """0600 file, `TOKEN serve SCOPES`; send the token as `Authorization: Bearer TOKEN`."""
    principal: str
    """The principal the generated token maps to (names the caller in the audit log)."""
    audit_log: str
    """The hash-chained audit log all hosted servers append to."""
    unavailable: dict[str, str] = {}
    """Servers that could not be hosted, with the reason."""


class WorkspacesNote(BaseModel):
    """What a running workspace service tells: where it listens and logs."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    service: str
    """This instance's id (diff and close requests go to `codeloop.workspaces.<service>.*`)."""
    url: str
    """Base URL of the listener; a workspace's servers are at `URL/w/<workspace>/<server>/mcp`."""
    audit_log: str
    work_dir: str
    stripped_env: list[str]
    """Credential variables removed from this process's environment at start (names only)."""


class ConsoleNote(BaseModel):
    """The web console a running `codeloop serve` hosts (`codeloop console` prints its address)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    url: str
    """Its address, `http://HOST:PORT/`; a browser signs in with `?token=TOKEN` once."""
    token_file: str
    """The generated token's 0600 file (its one line is the token), or the `--console-token-file`
    given (`TOKEN PRINCIPAL SCOPES` lines)."""
    generated: bool
    """True when serve made the token (principal `serve`, an operator) at its start."""


class ServeNote(BaseModel):
    """What a running `codeloop serve` wrote into its state directory, for the other commands."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    nats_url: str
    """Comma-separated URLs clients should connect to."""
    pid: int
    state_dir: str
    roles: list[str]
    embedded: bool
    mcp: McpNote | None = None
    """The hosted tool servers; None with `--no-mcp`."""
    credentials_file: str | None = None
    """0600 JSON file `{"user": ..., "password": ...}` the embedded NATS server requires; None
    when serve joined an existing server (`--nats`)."""
    metrics_url: str | None = None
    """Where the Prometheus metrics are served, `http://HOST:PORT/metrics`; None with `--no-metrics`."""
    workspaces: WorkspacesNote | None = None
    """The workspace service this process runs (`--workspaces`); None without."""
    console: ConsoleNote | None = None
    """The web console; None with `--no-console`."""


def write_serve_note(state_dir: Path, note: ServeNote) -> Path:
    """Write `note` as `STATE_DIR/serve.json`; its path."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / SERVE_NOTE
    # Written whole then renamed, so a reader never sees half a note.
    partial = path.with_name(f".{SERVE_NOTE}.{os.getpid()}")
    partial.write_text(note.model_dump_json(indent=2))
    partial.replace(path)
    return path


def read_serve_note(state_dir: Path) -> ServeNote | None:
    """The note of `state_dir`'s serve, or None when there is none (or it cannot be read)."""
    try:
        return ServeNote.model_validate(json.loads((state_dir / SERVE_NOTE).read_text()))
    except (OSError, ValueError):
        return None


def client_bus_config(**options: Unpack[ConnectionOptions]) -> BusConfig:
    """Config for submit/watch/status: the given URL, else the one the local `codeloop serve` noted.

    Raises:
        ConfigError: no URL given and no running `codeloop serve` found.
    """
    config = bus_config(**options)
    found = serve_to_join(config)
    if found is None:
        raise ConfigError(
            f"no NATS URL: start `codeloop serve` (it notes its URL in {config.state_dir / SERVE_NOTE}), "
            "or pass --nats URL / set CODELOOP_NATS_URL"
        )
    return found


def serve_to_join(config: BusConfig) -> BusConfig | None:
    """`config` itself when it names servers, else `config` pointed at the running serve its state
    directory noted; None when there is neither.

    Raises:
        ConfigError: the noted credentials file is unusable.
    """
    if config.servers:
        return config
    note = read_serve_note(config.state_dir)
    if note is None or not _alive(note.pid):
        return None
    return client_config_for(config, note)


def client_config_for(config: BusConfig, note: ServeNote) -> BusConfig:
    """`config` pointed at the serve of `note`: its URL, and its embedded server's credentials
    unless `config` brings its own.

    Raises:
        ConfigError: the noted credentials file is unusable.
    """
    update: dict[str, object] = {"servers": tuple(note.nats_url.split(","))}
    own = config.user or config.password or config.token or config.creds_file
    if note.credentials_file and not own:
        update |= _embedded_credentials(Path(note.credentials_file))
    return config.model_copy(update=update)


def _embedded_credentials(path: Path) -> dict[str, object]:
    """user/password of the local serve's embedded NATS, from the 0600 file it noted."""
    try:
        found = read_credentials(path.parent)
    except CredentialsError as exc:
        raise ConfigError(str(exc)) from None
    if found is None:
        raise ConfigError(
            f"the local `codeloop serve` noted credentials in {path}, but the file is gone; restart serve"
        )
    return {"user": found.user, "password": found.password}


def serve_is_alive(note: ServeNote) -> bool:
    """Whether the process that wrote `note` still runs (a note outlives a serve that was killed)."""
    return _alive(note.pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
