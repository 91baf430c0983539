"""The configuration files: where they are, what each may hold, and one error per mistake.

    user file     `config.toml` in the user configuration directory (platformdirs:
                  `$XDG_CONFIG_HOME/codeloop/config.toml`, by default `~/.config/codeloop/config.toml`)
    project file  `codeloop.toml` at the repository root, else the `[tool.codeloop]` table of its
                  `pyproject.toml`

Both have one schema (`FileConfig`; docs/configuration.md lists every key). A file is read whole
and checked whole before anything uses it: bad TOML names the file and the line, an unknown key
names the key and the keys allowed there, a wrong value names the key and what it must be.

A file's `function:` model paths are relative to the file's directory, so a project file naming
`function:models/scripted.py:fix` means the same model wherever codeloop runs.
"""

import datetime
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
    create_model,
    field_validator,
)
from pydantic.fields import FieldInfo

from agents.messages import Budgets, ModelOptions
from agents.orchestrator.stages import installed_kinds
from codeloop.config.errors import ConfigError
from sandbox.limits import SandboxLimits

PROJECT_FILE = "codeloop.toml"
USER_FILE = "config.toml"
STAGE_KINDS = tuple(installed_kinds())

RoleName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
ModelName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4096)]
Stage = Annotated[str, StringConstraints(pattern=rf"^({'|'.join(STAGE_KINDS)}):[a-z][a-z0-9_-]{{0,62}}$")]


def _all_optional(model: type[BaseModel], name: str) -> type[BaseModel]:
    """`model`'s fields, each optional with its constraints kept: a file sets only some of them."""
    fields: dict[str, Any] = {
        key: (info.annotation | None, FieldInfo.merge_field_infos(info, default=None))  # pyright: ignore[reportOperatorIssue] - annotation | None builds the optional type at run time
        for key, info in model.model_fields.items()
    }
    return create_model(name, __config__=ConfigDict(extra="forbid", frozen=True), **fields)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class SandboxFile(_all_optional(SandboxLimits, "SandboxLimitsFile")):
    backend: str | None = Field(default=None, pattern=r"^(auto|gvisor|process)$")
    """gvisor | process | auto (`CODELOOP_SANDBOX`)."""


class ToolsFile(_Closed):
    scopes: list[Annotated[str, StringConstraints(pattern=r"^(read|write|execute)$")]] | None = None
    """Scopes `codeloop mcp` grants when `--scopes` is not given."""
    secrets_allow: list[str] | None = None
    """Globs taken off the tool servers' secrets deny-list (`CODELOOP_SECRETS_ALLOW`)."""
    secrets_deny: list[str] | None = None
    """Globs added to the deny-list (`CODELOOP_SECRETS_DENY`)."""


class TelemetryFile(_Closed):
    otlp_endpoint: str | None = None
    """OTLP/HTTP collector base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`)."""
    trace_file: str | None = None
    """JSON-lines span file (`CODELOOP_TRACE_FILE`)."""
    include_content: bool | None = None
    """Prompts and tool content in spans (`CODELOOP_TRACE_CONTENT`)."""


class VerificationFile(_Closed):
    require: Literal["passed"] | None = None
    """`passed`: an unverified patch ends its task `handed_off` (`--require-verified`)."""
    test_command: str | None = Field(default=None, min_length=1)
    """The repository's test command, `{tests}` for the selected test ids or files."""


BudgetsFile = _all_optional(Budgets, "BudgetsFile")
INDEX_DATE = re.compile(r"^(git|latest|\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?)$")
"""`[environment] index_date`: `git`, `latest`, or an ISO 8601 date or date-time."""


class EnvironmentFile(_Closed):
    """`[environment]`: the project environment tests run in (docs/environments.md)."""

    enabled: bool | None = None
    """false: no project environment; commands use codeloop's own interpreter."""
    python: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] | None = None
    """A version (`3.9`), a specifier (`>=3.8,<3.11`) or an interpreter path."""
    install: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]] | None = None
    """Install commands run in the new virtualenv, in order; replaces detection."""
    index_date: str | None = Field(default=None, pattern=INDEX_DATE.pattern)
    """`git` (the dependency files' last commit), `latest`, or an ISO 8601 date."""
    max_size_mb: int | None = Field(default=None, ge=0)
    """The environment cache's size limit (0: none)."""
    build_timeout_s: float | None = Field(default=None, gt=0)
    """Wall-clock limit of one build."""
    python_paths: list[Annotated[str, StringConstraints(min_length=1)]] | None = None
    """Interpreters considered before pyenv's, uv's and PATH's."""

    @field_validator("index_date", mode="before")
    @classmethod
    def _toml_date(cls, value: object) -> object:
        # TOML has date and date-time values of its own: `index_date = 2023-02-22` is meant too.
        return value.isoformat() if isinstance(value, (datetime.date, datetime.time)) else value


class FileConfig(_Closed):
    """Everything one configuration file may hold; every key is optional."""

    models: dict[RoleName, ModelName | Annotated[list[ModelName], Field(min_length=1)]] = {}
    """Role (`default`, `planner`, `coder`, a plug-in role's name) -> a model, or a list tried in order."""
    model_settings: dict[ModelName, ModelOptions] = {}
    """Model name -> its settings and price."""
    budgets: BudgetsFile = BudgetsFile()  # type: ignore[valid-type] - BudgetsFile is a model class built at import time by create_model
    """Limits of every task."""
    pipelines: dict[RoleName, Annotated[list[Stage], Field(min_length=1)]] = {}
    """Pipeline name -> its stages, `KIND:ROLE` each."""
    sandbox: SandboxFile = SandboxFile()
    tools: ToolsFile = ToolsFile()
    telemetry: TelemetryFile = TelemetryFile()
    verification: VerificationFile = VerificationFile()
    environment: EnvironmentFile = EnvironmentFile()
    mcp_servers: dict[str, object] = {}
    """The user's MCP servers by name, each table as written (`codeloop.config.mcp_servers.parse_servers`
    checks each); refused in a repository's file."""


_ALLOWED: dict[str, type[BaseModel]] = {
    "": FileConfig,
    "budgets": BudgetsFile,
    "sandbox": SandboxFile,
    "tools": ToolsFile,
    "telemetry": TelemetryFile,
    "verification": VerificationFile,
    "environment": EnvironmentFile,
    "model_settings": ModelOptions,
}


@dataclass(frozen=True)
class ConfigFile:
    """One file that was found and read."""

    path: Path
    table: str | None
    """`tool.codeloop` for a pyproject.toml; None for a file of its own."""
    config: FileConfig


def user_file() -> Path:
    """The user configuration file's path (it may not exist)."""
    return Path(platformdirs.user_config_dir("codeloop")) / USER_FILE


def user_instructions_file() -> Path:
    """The user's own project instructions (`AGENTS.md` beside the user file; it may not exist)."""
    return user_file().with_name("AGENTS.md")


def user_file_table(section: str) -> dict[str, JsonValue]:
    """The values the user file sets in its table `section` (`{}` when there is no user file or it
    does not read): what serves when a workspace's own configuration no longer reads."""
    path = user_file()
    try:
        table = getattr(read_config_file(path).config, section) if path.is_file() else None
    except ConfigError:
        table = None
    return table.model_dump(exclude_none=True) if table is not None else {}


def project_file(repo: Path) -> tuple[Path, str | None] | None:
    """The project file of `repo` and the table holding the configuration, if there is one."""
    own = repo / PROJECT_FILE
    if own.is_file():
        return own, None
    pyproject = repo / "pyproject.toml"
    if pyproject.is_file() and "tool.codeloop" in _read_text(pyproject):
        return pyproject, "tool.codeloop"
    return None


def read_config_file(path: Path, table: str | None = None) -> ConfigFile:
    """Read and check one file (see the module docstring).

    Raises:
        ConfigError: the file cannot be read, is not TOML, or holds an unknown key or a wrong value.
    """
    text = _read_text(path)
    try:
        data: object = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    prefix: tuple[str, ...] = ()
    if table:
        prefix = tuple(table.split("."))
        for key in prefix:
            data = data.get(key, {}) if isinstance(data, dict) else {}
    try:
        config = FileConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path, text, prefix)) from None
    return ConfigFile(path=path, table=table, config=_anchored(config, path.parent))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _describe(exc: ValidationError, path: Path, text: str, prefix: tuple[str, ...]) -> str:
    """The first error of `exc` as `FILE line N: KEY: what is wrong; what is allowed`."""
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"] if not isinstance(part, int)]
    # A union (a model name or a list of them) reports the branch it tried; the key is what matters.
    loc = [part for part in loc if not part.startswith(("str", "list[", "constrained-str"))]
    key = ".".join((*prefix, *loc))
    line = _line_of(text, [*prefix, *loc])
    where = f"{path} line {line}" if line else str(path)
    if error["type"] == "extra_forbidden":
        section = (
            "model_settings" if loc and loc[0] == "model_settings" and len(loc) == 3 else ".".join(loc[:-1])
        )
        allowed = ", ".join(_ALLOWED[section].model_fields) if section in _ALLOWED else ""
        return f"{where}: unknown key {key!r}" + (f"; allowed here: {allowed}" if allowed else "")
    got = error.get("input")
    shown = f" (got {got!r})" if not isinstance(got, dict) else ""
    message = error["msg"]
    if error["type"] == "string_pattern_mismatch":
        message = _pattern_help(loc)
    elif len(loc) == 2 and loc[0] == "models":
        message = "must be a model name (PROVIDER:MODEL or function:PATH.py:NAME) or a non-empty list of them"
    return f"{where}: {key}: {message}{shown}"


def _pattern_help(loc: list[str]) -> str:
    if loc and loc[0] == "pipelines":
        if len(loc) == 1:
            return "a pipeline name is lower-case letters, digits, '-' and '_'"
        return f"each stage is KIND:ROLE with KIND one of {', '.join(STAGE_KINDS)} and ROLE a role name"
    if loc and loc[0] == "models":
        return "a role name is lower-case letters, digits, '-' and '_' (default, planner, coder, ...)"
    if loc and loc[-1] == "backend":
        return "must be auto, gvisor or process"
    if loc and loc[0] == "tools":
        return "a scope is read, write or execute"
    if loc and loc[-1] == "index_date":
        return "must be git, latest, or an ISO 8601 date such as 2023-02-22 or 2023-02-22T14:00:17Z"
    return "has the wrong form"


def _line_of(text: str, keys: list[str]) -> int | None:
    """The line that sets `keys[-1]` (or opens its table), searching after its parent table's header."""
    lines = text.splitlines()
    start = 0
    for depth in range(len(keys) - 1, 0, -1):
        header = re.compile(
            r"^\s*\[+\s*" + r"\s*\.\s*".join(_key_pattern(k) for k in keys[:depth]) + r"\s*\]"
        )
        found = next((i for i, line in enumerate(lines) if header.match(line)), None)
        if found is not None:
            start = found
            break
    last = _key_pattern(keys[-1]) if keys else None
    if last is None:
        return None
    setting = re.compile(rf"^\s*(?:[\w.\"-]+\s*\.\s*)*{last}\s*=|^\s*\[+[^\]]*{last}\s*\]")
    for number in range(start, len(lines)):
        if setting.search(lines[number]):
            return number + 1
    return start + 1 if start else None


def _key_pattern(key: str) -> str:
    return rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"


def _anchored(config: FileConfig, base: Path) -> FileConfig:
    """`config` with its relative `function:` paths made absolute against `base`."""
    models = {
        role: [anchor_model(n, base) for n in ([value] if isinstance(value, str) else value)]
        for role, value in config.models.items()
    }
    options = {anchor_model(name, base): value for name, value in config.model_settings.items()}
    environment = config.environment
    if environment.python_paths is not None:
        # An interpreter path in a file means the same wherever codeloop runs, as `function:` paths do.
        paths = [str((base / Path(p).expanduser()).resolve()) for p in environment.python_paths]
        environment = environment.model_copy(update={"python_paths": paths})
    return config.model_copy(update={"models": models, "model_settings": options, "environment": environment})


def anchor_model(name: str, base: Path) -> str:
    """`name` with a relative `function:` or `local:` path made absolute against `base` (other
    names as given)."""
    name = name.strip()
    if name.startswith("local:"):
        file = Path(name.removeprefix("local:").strip()).expanduser()
        return f"local:{file if file.is_absolute() else (base / file).resolve()}"
    if not name.startswith("function:"):
        return name
    path, sep, attr = name.removeprefix("function:").rpartition(":")
    if not sep or not path:
        return name  # malformed: the model check names it
    file = Path(path).expanduser()
    if not file.is_absolute():
        file = base / file
    return f"function:{file.resolve()}:{attr}"
