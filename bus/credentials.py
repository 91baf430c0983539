"""Credentials of the embedded nats-server, so the bus is not open to every local user.

Without them anyone on the machine could read the events stream (task texts, tool calls) and
submit tasks. `ensure_credentials` makes a user `codeloop` with a random password once per state
directory and keeps it in `<state_dir>/nats-credentials.json`, created 0600:

    {"user": "codeloop", "password": "..."}

The server gets them through a 0600 config file (`--config`), never on its command line, which
every local user can read in /proc. A client in any language connects with that user and
password (`nats://127.0.0.1:PORT` plus the user/password options of its NATS library).
`codeloop submit`/`watch`/`status` read the file themselves.
"""

import json
import os
import secrets
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

CREDENTIALS_FILE = "nats-credentials.json"
SERVER_CONFIG_FILE = "nats-auth.conf"
USER = "codeloop"


class CredentialsError(Exception):
    """The credentials file exists but cannot be used; the message says how to fix it."""


class BusCredentials(BaseModel):
    """The user and password every client of the embedded server must present."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    user: str
    password: str
    """Random, 256 bits, URL-safe."""


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` readable by its owner only, replacing the old file atomically."""
    # Created 0600 from the first byte, then renamed over the old file: never readable by others.
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    partial.replace(path)


def read_credentials(state_dir: Path) -> BusCredentials | None:
    """The credentials of the embedded server of `state_dir`, or None when it has none yet.

    Raises:
        CredentialsError: the file is unreadable or not a credentials file.
    """
    path = state_dir / CREDENTIALS_FILE
    try:
        return BusCredentials.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError, ValueError) as exc:
        raise CredentialsError(
            f"{path} is not a readable NATS credentials file ({type(exc).__name__}); delete it and "
            "restart `codeloop serve` to generate new ones"
        ) from None


def ensure_credentials(state_dir: Path) -> BusCredentials:
    """The state directory's credentials, generated (0600) when it has none; the file is made
    0600 again if someone widened it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    found = read_credentials(state_dir)
    if found is not None:
        os.chmod(state_dir / CREDENTIALS_FILE, 0o600)
        return found
    made = BusCredentials(user=USER, password=secrets.token_urlsafe(32))
    write_private(state_dir / CREDENTIALS_FILE, made.model_dump_json() + "\n")
    return made


def server_auth_args(credentials: BusCredentials, state_dir: Path) -> list[str]:
    """nats-server arguments that require `credentials`: a 0600 config file, rewritten each start."""
    conf = state_dir / SERVER_CONFIG_FILE
    # json.dumps quotes the way NATS config strings are quoted (it accepts JSON string syntax).
    body = f"authorization {{\n  user: {json.dumps(credentials.user)}\n  password: {json.dumps(credentials.password)}\n}}\n"
    write_private(conf, body)
    return ["--config", str(conf)]
