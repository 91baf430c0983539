"""The user's own MCP servers: `[mcp_servers.NAME]` in the user file, or a file named by `--mcp-config`.

    [mcp_servers.memory]                       # stdio
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-memory"]
    env = { MEMORY_FILE_PATH = "/home/me/.memory.json" }
    scope = "write"                            # read | write | execute (default: execute)
    confirm = ["delete_entities"]              # always | never | [tool, ...] (default: never for
                                               # a server declared read, else always)
    [mcp_servers.docs]                         # Streamable HTTP
    url = "https://docs.example.com/mcp"
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
    scope = "read"

`--mcp-config FILE` takes the same table in a TOML file, or Claude Code's JSON
(`{"mcpServers": {"NAME": {"command": ..., "args": [...], "env": {...}}}}`, `"type": "http"` with
`url` and `headers` for Streamable HTTP), where `scope` and `confirm` may be added per server. Its
servers replace the user file's of the same name.

A repository's configuration (`codeloop.toml`, `[tool.codeloop]`) may not declare servers: a
repository must not make your agent start programs (`refuse_repository_servers`).
"""

import json
import re
import tomllib
from pathlib import Path

from pydantic import ValidationError

from agents.messages import McpServer
from codeloop.config.errors import ConfigError

_CLAUDE_TYPES = {"stdio", "http", "streamable-http", "streamable_http"}
_SCHEME = re.compile(r"^(?:Bearer|Basic|Token)\s*", re.I)
_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def parse_servers(table: object, *, where: str) -> list[McpServer]:
    """The servers of an `mcp_servers` table (name -> settings), checked.

    Raises:
        ConfigError: a server's name or a setting is wrong (the message names which and where).
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: mcp_servers must be a table of servers by name")
    servers = []
    for name, settings in table.items():
        if not isinstance(settings, dict):
            raise ConfigError(f"{where}: mcp_servers.{name} must be a table (command = ..., or url = ...)")
        try:
            servers.append(McpServer.model_validate({**settings, "name": name}))
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            key = ".".join(str(p) for p in error["loc"] if not isinstance(p, int))
            what = f"mcp_servers.{name}" + (f".{key}" if key else "")
            problem = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                allowed = ", ".join(f for f in McpServer.model_fields if f != "name")
                problem = f"unknown key; allowed: {allowed}"
            raise ConfigError(f"{where}: {what}: {problem}") from None
    return servers


def read_mcp_config(path: Path) -> list[McpServer]:
    """The servers of `--mcp-config FILE`: TOML with `[mcp_servers.NAME]`, or Claude Code's JSON.

    Raises:
        ConfigError: the file cannot be read, does not parse, or declares a server wrongly.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"--mcp-config {path}: cannot be read: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--mcp-config {path}: not valid JSON: {exc}") from None
        table = data.get("mcpServers", data.get("mcp_servers")) if isinstance(data, dict) else None
        if table is None:
            raise ConfigError(f'--mcp-config {path}: no "mcpServers" object')
        return parse_servers(_from_claude(table, where=str(path)), where=str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--mcp-config {path}: not valid TOML or JSON: {exc}") from None
    if "mcp_servers" not in data:
        raise ConfigError(f"--mcp-config {path}: no [mcp_servers.NAME] table")
    return parse_servers(data["mcp_servers"], where=str(path))


def _from_claude(table: object, *, where: str) -> dict[str, object]:
    """Claude Code's server objects as codeloop's settings (`type` dropped once checked)."""
    if not isinstance(table, dict):
        raise ConfigError(f'{where}: "mcpServers" must be an object of servers by name')
    out: dict[str, object] = {}
    for name, settings in table.items():
        if isinstance(settings, dict):
            kind = settings.get("type", "stdio")
            if kind not in _CLAUDE_TYPES:
                raise ConfigError(
                    f"{where}: mcpServers.{name}.type: {kind!r} is not supported; use stdio or http"
                )
            settings = {k: v for k, v in settings.items() if k != "type"}
        out[name] = settings
    return out


def literal_secrets(servers: list[McpServer]) -> list[tuple[str, str]]:
    """(server, `env.KEY` or `headers.KEY`) of each value that looks like a secret written out
    rather than named as `${VAR}`: codeloop's one secret rule would redact it."""
    from redaction import names_secret, redact_text

    found = []
    for server in servers:
        for table, values in (("env", server.env), ("headers", server.headers)):
            for key, value in values.items():
                rest = _SCHEME.sub("", _VARIABLE.sub("", value).strip())
                if len(rest) >= 8 and (names_secret(key) or redact_text(rest) != rest):
                    found.append((server.name, f"{table}.{key}"))
    return found


def merged(user: list[McpServer], given: list[McpServer]) -> list[McpServer]:
    """The user file's servers with `--mcp-config`'s added, the latter winning by name."""
    by_name = {s.name: s for s in user} | {s.name: s for s in given}
    return list(by_name.values())


def user_mcp_servers() -> list[McpServer]:
    """The servers of the user file's `[mcp_servers]` (none without a user file).

    Raises:
        ConfigError: the user file is malformed or declares a server wrongly.
    """
    from codeloop.config.files import read_config_file, user_file

    path = user_file()
    if not path.is_file():
        return []
    return parse_servers(read_config_file(path).config.mcp_servers, where=str(path))


def refuse_repository_servers(repo: Path) -> None:
    """Refuse a repository whose configuration declares MCP servers.

    Raises:
        ConfigError: its `codeloop.toml` (or `[tool.codeloop]`) has `[mcp_servers]`, saying why
            and where servers belong.
    """
    from codeloop.config.files import project_file, read_config_file, user_file

    found = project_file(repo.resolve())
    if found is None or not read_config_file(*found).config.mcp_servers:
        return
    raise ConfigError(
        f"{found[0]}: [mcp_servers] is not allowed in a repository's configuration: a repository must "
        f"not make your agent start programs. Declare your MCP servers in your user file "
        f"({user_file()}) or pass --mcp-config FILE."
    )
