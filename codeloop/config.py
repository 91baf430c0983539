"""Configuration read once, at the CLI edge: arguments and environment become frozen models.

Environment variables (each overridden by its command-line option):
    CODELOOP_HOME        state directory (default ~/.codeloop): embedded NATS store, serve.json
    CODELOOP_NATS_URL    comma-separated NATS URLs of an existing server or cluster
    CODELOOP_NATS_CREDS  NATS credentials file; CODELOOP_NATS_USER / _PASSWORD / _TOKEN
    CODELOOP_NATS_TLS_CA / _TLS_CERT / _TLS_KEY   TLS material
    OTEL_EXPORTER_OTLP_ENDPOINT   export traces over OTLP/HTTP to this base URL (`codeloop.telemetry`)
    CODELOOP_TRACE_FILE  also append every span as a JSON line to this file
    CODELOOP_TRACE_CONTENT  1: put prompt and tool content into spans (default: kept out)
    CODELOOP_SECRETS_ALLOW / CODELOOP_SECRETS_DENY   comma-separated globs taken off / added to
                         the tool servers' secrets deny-list (`tool_servers.secret_files`)
    CODELOOP_SANDBOX     gvisor|process|auto (default auto): which sandbox backends `exec` may use
    CODELOOP_CACHE_DIR   the shared caches (embeddings, converted models); default the platform's
                         user cache directory, `~/.cache/codeloop` on Linux

Only this module and `codeloop.settings` (the configuration files, the models and budgets of a
task: CODELOOP_MODEL, CODELOOP_PLANNER_MODEL, CODELOOP_CODER_MODEL) read them; the packages get
what they need as arguments.

State that is not the user's work lives in the home, never in the repository a tool server is
confined to: each served root gets `HOME/roots/<name>-<hash>/` (its audit log, its index), so a
read grant writes nothing under the root and a read-only checkout can be served.
"""

import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from bus.config import BusConfig, TlsConfig
from codeloop.errors import CodeloopError
from layout import DEFAULT_HOME, HOME_ENV, ROOTS_DIR, SERVE_NOTE

if TYPE_CHECKING:
    from tool_servers.secret_files import SecretRules


class ConfigError(CodeloopError):
    """Bad configuration; the message says what is wrong and how to fix it."""


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


class TelemetryConfig(BaseModel):
    """Where this process's spans go; nothing is traced unless one of the two is set."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    otlp_endpoint: str | None = None
    """Base URL of an OTLP/HTTP collector (`OTEL_EXPORTER_OTLP_ENDPOINT`); spans go to `/v1/traces`."""
    trace_file: Path | None = None
    """A JSON-lines file every span is appended to (`CODELOOP_TRACE_FILE`)."""
    include_content: bool = False
    """Prompts, model output and tool arguments in spans (`CODELOOP_TRACE_CONTENT=1`); off by default."""

    @property
    def enabled(self) -> bool:
        return bool(self.otlp_endpoint or self.trace_file)


def telemetry_config() -> TelemetryConfig:
    """The telemetry settings of the environment (see the module docstring)."""
    env = os.environ
    return TelemetryConfig(
        otlp_endpoint=env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None,
        trace_file=_path(env.get("CODELOOP_TRACE_FILE")),
        include_content=env.get("CODELOOP_TRACE_CONTENT", "").strip().lower() in ("1", "true", "yes"),
    )


class ToolServerConfig(BaseModel):
    """What the tool servers of this process take from the environment."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    sandbox_policy: str = "auto"
    """`CODELOOP_SANDBOX` as set: `sandbox.backend.parse_policy` checks it where a sandbox is opened,
    so a bad value is the exec server's `PolicyError` result (and `codeloop doctor`'s failed check)."""
    cache_dir: Path | None = None
    """`CODELOOP_CACHE_DIR`; None: the platform's user cache directory (`embed_cache.default_cache_root`)."""


def tool_server_config() -> ToolServerConfig:
    """The tool servers' settings of the environment (see the module docstring)."""
    env = os.environ
    return ToolServerConfig(
        sandbox_policy=env.get("CODELOOP_SANDBOX", "auto"),
        cache_dir=_path(env.get("CODELOOP_CACHE_DIR")),
    )


def state_dir_from(option: Path | None) -> Path:
    raw = option or os.environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(raw).expanduser()


def root_home(root: Path, home: Path | None = None) -> Path:
    """The directory in the home holding codeloop's state about `root` (audit log, index)."""
    resolved = root.expanduser().resolve()
    slug = re.sub(r"[^A-Za-z0-9]+", "_", resolved.name).strip("_")[:40] or "root"
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    return state_dir_from(home) / ROOTS_DIR / f"{slug}-{digest}"


def secret_rules(*, allow: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> "SecretRules":
    """The secrets deny-list: the default, changed by the environment, then by `allow`/`deny`."""
    from tool_servers.secret_files import DEFAULT_RULES

    def env_list(name: str) -> tuple[str, ...]:
        return tuple(p.strip() for p in os.environ.get(name, "").split(",") if p.strip())

    return DEFAULT_RULES.with_changes(
        allow=(*env_list("CODELOOP_SECRETS_ALLOW"), *allow),
        deny=(*env_list("CODELOOP_SECRETS_DENY"), *deny),
    )


def _path(value: str | Path | None) -> Path | None:
    return Path(value).expanduser() if value else None


def bus_config(
    *,
    nats_url: str | None = None,
    state_dir: Path | None = None,
    replicas: int | None = None,
    creds: Path | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    tls_ca: Path | None = None,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    name: str = "codeloop",
) -> BusConfig:
    """Build the `BusConfig` from options, falling back to the environment."""
    env = os.environ
    url = nats_url or env.get("CODELOOP_NATS_URL") or ""
    servers = tuple(u.strip() for u in url.split(",") if u.strip())
    for server in servers:
        if "://" not in server:
            raise ConfigError(f"NATS URL {server!r} has no scheme; write it as nats://HOST:PORT")
    ca, cert, key = (
        _path(tls_ca or env.get("CODELOOP_NATS_TLS_CA")),
        _path(tls_cert or env.get("CODELOOP_NATS_TLS_CERT")),
        _path(tls_key or env.get("CODELOOP_NATS_TLS_KEY")),
    )
    creds_file = _path(creds or env.get("CODELOOP_NATS_CREDS"))
    for label, path in (("credentials", creds_file), ("TLS CA", ca), ("TLS cert", cert), ("TLS key", key)):
        if path is not None and not path.is_file():
            raise ConfigError(f"{label} file {path} does not exist")
    return BusConfig(
        servers=servers,
        state_dir=state_dir_from(state_dir),
        replicas=replicas or 1,
        name=name,
        user=user or env.get("CODELOOP_NATS_USER"),
        password=password or env.get("CODELOOP_NATS_PASSWORD"),
        token=token or env.get("CODELOOP_NATS_TOKEN"),
        creds_file=creds_file,
        tls=TlsConfig(ca_file=ca, cert_file=cert, key_file=key) if (ca or cert or key) else None,
    )


def write_serve_note(state_dir: Path, note: ServeNote) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / SERVE_NOTE
    # Written whole then renamed, so a reader never sees half a note.
    partial = path.with_name(f".{SERVE_NOTE}.{os.getpid()}")
    partial.write_text(note.model_dump_json(indent=2))
    partial.replace(path)
    return path


def read_serve_note(state_dir: Path) -> ServeNote | None:
    try:
        return ServeNote.model_validate(json.loads((state_dir / SERVE_NOTE).read_text()))
    except (OSError, ValueError):
        return None


def client_bus_config(**options: object) -> BusConfig:
    """Config for submit/watch/status: the given URL, else the one the local `codeloop serve` noted.

    Raises:
        ConfigError: no URL given and no running `codeloop serve` found.
    """
    config = bus_config(**options)  # type: ignore[arg-type]
    if config.servers:
        return config
    note = read_serve_note(config.state_dir)
    if note is None or not _alive(note.pid):
        raise ConfigError(
            f"no NATS URL: start `codeloop serve` (it notes its URL in {config.state_dir / SERVE_NOTE}), "
            "or pass --nats URL / set CODELOOP_NATS_URL"
        )
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
    from bus.credentials import CredentialsError, read_credentials

    try:
        found = read_credentials(path.parent)
    except CredentialsError as exc:
        raise ConfigError(str(exc)) from None
    if found is None:
        raise ConfigError(
            f"the local `codeloop serve` noted credentials in {path}, but the file is gone; restart serve"
        )
    return {"user": found.user, "password": found.password}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
