"""The environment's configuration, read once at the CLI edge: variables and options become frozen models.

Environment variables (each overridden by its command-line option):
    CODELOOP_HOME        state directory (default ~/.codeloop): embedded NATS store, serve.json
    CODELOOP_NATS_URL    comma-separated NATS URLs of an existing server or cluster
    CODELOOP_NATS_CREDS  NATS credentials file; CODELOOP_NATS_USER / _PASSWORD / _TOKEN
    CODELOOP_NATS_TLS_CA / _TLS_CERT / _TLS_KEY   TLS material
    OTEL_EXPORTER_OTLP_ENDPOINT   export traces over OTLP/HTTP to this base URL (`codeloop.wiring.telemetry`)
    CODELOOP_TRACE_FILE  also append every span as a JSON line to this file
    CODELOOP_TRACE_CONTENT  1: put prompt and tool content into spans (default: kept out)
    CODELOOP_SECRETS_ALLOW / CODELOOP_SECRETS_DENY   comma-separated globs taken off / added to
                         the tool servers' secrets deny-list (`tool_servers.secret_files`)
    CODELOOP_SANDBOX     gvisor|process|auto (default: the user file's [sandbox] backend, else auto):
                         which sandbox backends `exec` may use
    CODELOOP_CACHE_DIR   the shared caches (embeddings, converted models, SWE-bench environments);
                         default the platform's user cache directory, `~/.cache/codeloop` on Linux

Only this module and `codeloop.config.settings` (the configuration files, the models and budgets
of a task: CODELOOP_MODEL, CODELOOP_PLANNER_MODEL, CODELOOP_CODER_MODEL) read them; the packages
get what they need as arguments.

State that is not the user's work lives in the home, never in the repository a tool server is
confined to: each served root gets `HOME/roots/<name>-<hash>/` (its audit log, its index), so a
read grant writes nothing under the root and a read-only checkout can be served.
"""

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from bus.config import BusConfig, TlsConfig
from codeloop.config.errors import ConfigError
from codeloop.config.sandbox_backend import machine_backend
from layout import DEFAULT_HOME, HOME_ENV, ROOTS_DIR

if TYPE_CHECKING:
    from tool_servers.secret_files import SecretRules


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
    """`CODELOOP_SANDBOX`, else the user file's `[sandbox] backend` (`sandbox_backend.machine_backend`):
    `sandbox.backend.parse_policy` checks it where a sandbox is opened, so a bad value is the exec
    server's `PolicyError` result (and `codeloop doctor`'s failed check)."""
    cache_dir: Path | None = None
    """`CODELOOP_CACHE_DIR`; None: the platform's user cache directory (`embed_cache.default_cache_root`)."""


def tool_server_config() -> ToolServerConfig:
    """The tool servers' settings of the environment (see the module docstring)."""
    env = os.environ
    return ToolServerConfig(
        sandbox_policy=machine_backend(),
        cache_dir=_path(env.get("CODELOOP_CACHE_DIR")),
    )


def cache_dir() -> Path:
    """codeloop's cache directory, shared per machine: `CODELOOP_CACHE_DIR`, else the platform's."""
    configured = _path(os.environ.get("CODELOOP_CACHE_DIR"))
    if configured is not None:
        return configured
    import platformdirs

    return Path(platformdirs.user_cache_dir("codeloop"))


def sandbox_named() -> str | None:
    """`CODELOOP_SANDBOX` as set (None: not set), for a command whose default is its own."""
    return os.environ.get("CODELOOP_SANDBOX") or None


def build_environment() -> dict[str, str]:
    """The variables of this process an environment build passes on (`sandbox.environments.build_variables`)."""
    from sandbox.environments import build_variables

    return build_variables(os.environ)


def state_dir_from(option: Path | None) -> Path:
    """The state directory: `option`, else `CODELOOP_HOME`, else `~/.codeloop`."""
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
    # Here, not at the top: the tool protocol it comes with imports mcp (most of a second), which
    # the commands that read the environment without serving a tool have no use for.
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
    creds: Path | None = None,
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    tls_ca: Path | None = None,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
) -> BusConfig:
    """Build the `BusConfig` from the command line's NATS options (the keywords of a
    `codeloop.cli.connection.Connection`), falling back to the environment.

    Raises:
        ConfigError: a URL without a scheme, or a credentials or TLS file that does not exist.
    """
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
        user=user or env.get("CODELOOP_NATS_USER"),
        password=password or env.get("CODELOOP_NATS_PASSWORD"),
        token=token or env.get("CODELOOP_NATS_TOKEN"),
        creds_file=creds_file,
        tls=TlsConfig(ca_file=ca, cert_file=cert, key_file=key) if (ca or cert or key) else None,
    )
