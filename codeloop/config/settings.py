"""Settings: the configuration files, the environment and the command line made one typed value.

Precedence, highest first: command line > environment > project file > user file > defaults
(`codeloop.config.files` finds and checks the files). Every value remembers where it came from
(`Settings.origins`): `codeloop config show` prints it, and an error about a value names it.

Models merge by role, not by key: within one layer a role's own
entry beats that layer's `default`; across layers a higher layer's `default` beats a lower layer's
role entry, so `--model X` sets every role, as the CLI promises, even when a file names a coder
model. A role's entry may be a list: its model, then the fallbacks tried after a provider error.

Environment variables read here (each the same as the key it names):

    CODELOOP_MODEL, CODELOOP_PLANNER_MODEL, CODELOOP_CODER_MODEL     models.default / .planner / .coder
    CODELOOP_SANDBOX                                                 sandbox.backend
    CODELOOP_SECRETS_ALLOW, CODELOOP_SECRETS_DENY (comma-separated)  tools.secrets_allow / _deny
    OTEL_EXPORTER_OTLP_ENDPOINT, CODELOOP_TRACE_FILE, CODELOOP_TRACE_CONTENT   telemetry.*

The command line's layer is a task's options (`codeloop.config.task_options.TaskOptions.layer`):
the flags of `run`, `submit` and `eval`, or the arguments of the tasks server's `submit_task`.
`codeloop.config.checks.check_submission` is the one check of everything a submission names.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from agents.messages import BUILTIN_MODEL_ROLES, Budgets, ModelNames, ModelOptions
from codeloop.config.errors import ConfigError
from codeloop.config.files import ConfigFile, anchor_model, project_file, read_config_file, user_file
from codeloop.config.sandbox_backend import check_project_backend
from redaction import redact_text
from sandbox.environments.settings import EnvironmentSettings
from sandbox.limits import SandboxLimits

Source = Literal["default", "user file", "project file", "center", "environment", "flag"]

ENV_KEYS: Mapping[str, str] = {
    "CODELOOP_MODEL": "models.default",
    "CODELOOP_PLANNER_MODEL": "models.planner",
    "CODELOOP_CODER_MODEL": "models.coder",
    "CODELOOP_SANDBOX": "sandbox.backend",
    "CODELOOP_SECRETS_ALLOW": "tools.secrets_allow",
    "CODELOOP_SECRETS_DENY": "tools.secrets_deny",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "telemetry.otlp_endpoint",
    "CODELOOP_TRACE_FILE": "telemetry.trace_file",
    "CODELOOP_TRACE_CONTENT": "telemetry.include_content",
}
"""Environment variable -> the key it sets (see the module docstring)."""


class Origin(BaseModel):
    """Where one effective value came from."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    source: Source
    """default, user file, project file, environment or flag."""
    where: str | None = None
    """The file's path, the variable's or the option's name; None for a default."""

    def label(self) -> str:
        return self.source if self.where is None else f"{self.source} {self.where}"


class SandboxSettings(SandboxLimits):
    """The sandbox limits of the exec tool server and which backends it may use."""

    backend: str = "auto"
    """gvisor | process | auto; checked where a sandbox is opened (`sandbox.backend.parse_policy`)."""


class ToolSettings(BaseModel):
    """What the tool servers are granted and kept from."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    scopes: list[str] = ["read"]
    """Scopes a tool server is granted when its command line names none."""
    secrets_allow: list[str] = []
    """Globs taken off the secrets deny-list."""
    secrets_deny: list[str] = []
    """Globs added to the secrets deny-list."""


class TelemetrySettings(BaseModel):
    """Where spans go (`codeloop.wiring.telemetry`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    otlp_endpoint: str | None = None
    """Base URL of an OTLP/HTTP collector."""
    trace_file: str | None = None
    """A JSON-lines file every span is appended to."""
    include_content: bool = False
    """Prompts, model output and tool arguments in spans."""


class VerificationSettings(BaseModel):
    """How the verifier judges a task's patch (`[verification]`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    require: Literal["passed"] | None = None
    """`passed`: a task whose patch is `unverified` ends `handed_off` (`--require-verified`)."""
    test_command: str | None = None
    """The repository's test command, `{tests}` standing for the selected test ids or files.
    None: detected (pytest, Django's tests/runtests.py, sympy's bin/test)."""


_Default = TypeVar("_Default", int, float)
_Section = TypeVar("_Section", bound=BaseModel)


def _default(name: str, kind: type[_Default]) -> _Default:
    """`EnvironmentSettings`' default of field `name`, which is a `kind`: one default for both."""
    value = EnvironmentSettings.model_fields[name].default
    if not isinstance(value, kind):
        raise TypeError(f"EnvironmentSettings.{name} defaults to {value!r}, not a {kind.__name__}")
    return value


class EnvironmentSection(BaseModel):
    """`[environment]`: how the project environment is chosen, built and kept (`sandbox.environments`;
    `codeloop.config.project_environment.environment_settings` makes it an `EnvironmentSettings`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """False: no project environment; commands use codeloop's own interpreter."""
    python: str | None = None
    """The Python: a version, a specifier or an interpreter path; None: the recipe's."""
    install: list[str] | None = None
    """Install commands replacing detection; None: detect the recipe from the project's files."""
    index_date: str = "git"
    """`git`, `latest` or an ISO 8601 date: when the package index is read as of."""
    max_size_mb: int = _default("max_size_mb", int)
    """The environment cache's size limit in MB (0: none)."""
    build_timeout_s: float = _default("build_timeout_s", float)
    """Wall-clock limit of one build."""
    python_paths: list[str] = []
    """Interpreters considered first."""


class Settings(BaseModel):
    """The effective configuration of one command, and where each value came from."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    models: ModelNames
    """Every role spelled out (planner, coder, the plug-in roles a file names), with fallbacks and
    the settings of each model in use; what a task carries."""
    budgets: Budgets
    """The limits a task gets."""
    pipelines: dict[str, list[str]] = {}
    """Named pipelines: name -> `KIND:ROLE` stages, checked for form only."""
    sandbox: SandboxSettings = SandboxSettings()
    tools: ToolSettings = ToolSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    verification: VerificationSettings = VerificationSettings()
    environment: EnvironmentSection = EnvironmentSection()
    user_file: str | None = None
    """The user file that was read; None when there is none."""
    project_file: str | None = None
    """The project file that was read (a pyproject.toml's `[tool.codeloop]` counts); None when none."""
    origins: dict[str, Origin] = {}
    """Dotted key (`models.coder`, `budgets.max_steps`, ...) -> where its value came from."""

    def values(self) -> dict[str, dict[str, JsonValue]]:
        """Every effective value by dotted key: `{"value", "source", "where"}`, secrets masked."""

        def masked(value: JsonValue) -> JsonValue:
            if isinstance(value, str):
                return redact_text(value)
            if isinstance(value, list):
                return [masked(v) for v in value]
            return value

        shown: dict[str, dict[str, JsonValue]] = {}
        for key, origin in sorted(self.origins.items()):
            shown[key] = {"value": masked(self._value(key)), "source": origin.source, "where": origin.where}
        return shown

    def _value(self, key: str) -> JsonValue:
        section, _, rest = key.partition(".")
        if section == "models":
            chain = self.models.chain_for(rest)
            if chain is None:
                return None
            return chain.names[0] if len(chain.names) == 1 else [*chain.names]
        if section == "model_settings":
            name, _, option = rest.rpartition(".")
            return getattr(self.models.options[name], option)
        if section == "pipelines":
            return [*self.pipelines[rest]]
        return getattr(getattr(self, section), rest)


@dataclass
class _Layer:
    """One source's values: models by role (a chain each), everything else by dotted key."""

    source: Source
    where: str | None = None
    models: dict[str, list[str]] = field(default_factory=dict)
    values: dict[str, JsonValue] = field(default_factory=dict)
    wheres: dict[str, str] = field(default_factory=dict)
    """Per-key `where` where it differs from the layer's (a variable's or an option's name)."""

    def origin(self, key: str) -> Origin:
        return Origin(source=self.source, where=self.wheres.get(key, self.where))


FlagValues = Mapping[str, tuple[JsonValue, str]]
"""The command line's layer: dotted key -> (value, the flag or argument that set it), None values
left out (`TaskOptions.layer`)."""


def load_settings(
    *,
    repo: Path | None = None,
    flags: FlagValues | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """The effective settings: `flags`, then `environ` (default: this process's), then the project
    file of `repo` (default: the current directory), then the user file, then the defaults.
    Relative `function:` paths of flags and variables are taken against `cwd` (default: here).

    Raises:
        ConfigError: a file is unreadable or malformed, or a value is out of range (the message
            names the file and key, the variable or the option).
    """
    env = os.environ if environ is None else environ
    here = cwd or Path.cwd()
    files: list[tuple[Source, ConfigFile]] = []
    found = project_file((repo or here).resolve())
    if found is not None:
        files.append(("project file", read_config_file(*found)))
    user = user_file()
    if user.is_file():
        files.append(("user file", read_config_file(user)))
    layers = [_flag_layer(flags or {}, here), _env_layer(env, here)]
    layers += [_file_layer(source, file) for source, file in files]
    settings = _merge(layers)
    _check_project_backend(settings, files)
    return settings.model_copy(
        update={
            "project_file": next((str(f.path) for s, f in files if s == "project file"), None),
            "user_file": next((str(f.path) for s, f in files if s == "user file"), None),
        }
    )


def _check_project_backend(settings: Settings, files: list[tuple[Source, ConfigFile]]) -> None:
    """A repository's file may choose a stronger sandbox backend, never a weaker one (see
    `codeloop.config.sandbox_backend`).

    Raises:
        ConfigError: the project file's `sandbox.backend`, in effect, is weaker than the user
            file's or the default.
    """
    origin = settings.origins.get("sandbox.backend")
    if origin is None or origin.source != "project file":
        return
    project = next(f for s, f in files if s == "project file")
    user = next((f.config.sandbox.backend for s, f in files if s == "user file"), None)
    baseline_from = "from the user file" if user else "the default"
    check_project_backend(project.path, settings.sandbox.backend, user or "auto", baseline_from)


def _flag_layer(flags: FlagValues, cwd: Path) -> _Layer:
    layer = _Layer(source="flag")
    for key, (value, option) in flags.items():
        _put(layer, key, value, where=option, cwd=cwd)
    return layer


def _env_layer(env: Mapping[str, str], cwd: Path) -> _Layer:
    layer = _Layer(source="environment")
    for variable, key in ENV_KEYS.items():
        raw = env.get(variable, "").strip()
        if not raw:
            continue
        value: JsonValue = raw
        if key.startswith("tools.secrets_"):
            value = [p.strip() for p in raw.split(",") if p.strip()]
        elif key == "telemetry.include_content":
            value = raw.lower() in ("1", "true", "yes")
        _put(layer, key, value, where=variable, cwd=cwd)
    return layer


def _put(layer: _Layer, key: str, value: JsonValue, *, where: str, cwd: Path) -> None:
    section, _, rest = key.partition(".")
    if section == "models":
        layer.models[rest] = [anchor_model(str(value), cwd)]
    else:
        layer.values[key] = value
    layer.wheres[key] = where


def _file_layer(source: Source, file: ConfigFile) -> _Layer:
    config = file.config
    layer = _Layer(source=source, where=str(file.path), models=dict(config.models))  # type: ignore[arg-type] - a file's models table maps role names to model names, validated by the layer model
    for name, options in config.model_settings.items():
        for option, value in options.model_dump(exclude_none=True).items():
            layer.values[f"model_settings.{name}.{option}"] = value
    for name, stages in config.pipelines.items():
        layer.values[f"pipelines.{name}"] = list(stages)
    for section in ("budgets", "sandbox", "tools", "telemetry", "verification", "environment"):
        for key, value in getattr(config, section).model_dump(exclude_none=True).items():
            layer.values[f"{section}.{key}"] = value
    return layer


def _merge(layers: list[_Layer]) -> Settings:
    """One `Settings` from `layers`, highest precedence first (see the module docstring)."""
    origins: dict[str, Origin] = {}
    chains: dict[str, list[str]] = {}
    roles = {"planner", "coder"} | {r for layer in layers for r in layer.models if r != "default"}
    for role in ["default", *sorted(roles)]:
        for layer in layers:
            own = layer.models.get(role)
            chain = own or (layer.models.get("default") if role != "default" else None)
            if chain:
                chains[role] = chain
                origins[f"models.{role}"] = layer.origin(f"models.{role if own else 'default'}")
                break
        else:
            origins[f"models.{role}"] = Origin(source="default")
    values: dict[str, JsonValue] = {}
    for layer in reversed(layers):  # lowest first, so higher layers overwrite
        for key, value in layer.values.items():
            values[key] = value
            origins[key] = layer.origin(key)
    models = _model_names(chains, values)
    # Settings of models no role uses are not part of the effective configuration.
    unused = [k for k in origins if k.startswith("model_settings.") and _model_of(k) not in models.options]
    for key in unused:
        del origins[key]
    # In this order, the first section with a wrong value is the one an error names.
    budgets = _section("budgets", Budgets, values, origins)
    sandbox = _section("sandbox", SandboxSettings, values, origins)
    tools = _section("tools", ToolSettings, values, origins)
    telemetry = _section("telemetry", TelemetrySettings, values, origins)
    verification = _section("verification", VerificationSettings, values, origins)
    environment = _section("environment", EnvironmentSection, values, origins)
    pipelines = {
        k.partition(".")[2]: [str(stage) for stage in v]
        for k, v in values.items()
        if k.startswith("pipelines.") and isinstance(v, list)
    }
    return Settings(
        models=models,
        pipelines=pipelines,
        origins=origins,
        budgets=budgets,
        sandbox=sandbox,
        tools=tools,
        telemetry=telemetry,
        verification=verification,
        environment=environment,
    )


def _section(
    section: str, model: type[_Section], values: dict[str, JsonValue], origins: dict[str, Origin]
) -> _Section:
    """The `model` of `section` from its dotted keys in `values`; the keys it leaves to their
    defaults get a default origin.

    Raises:
        ConfigError: a value is out of range (the message names where it came from).
    """
    given = {k.partition(".")[2]: v for k, v in values.items() if k.startswith(f"{section}.")}
    try:
        settings = model.model_validate(given)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = f"{section}.{error['loc'][0]}"
        raise ConfigError(
            f"{_label(origins.get(key), key)}: {error['msg']} (got {error.get('input')!r})"
        ) from None
    for name in model.model_fields:
        origins.setdefault(f"{section}.{name}", Origin(source="default"))
    return settings


def _model_of(key: str) -> str:
    """The model name of a `model_settings.NAME.OPTION` key (NAME may hold dots)."""
    return key.removeprefix("model_settings.").rpartition(".")[0]


def _model_names(chains: dict[str, list[str]], values: dict[str, JsonValue]) -> ModelNames:
    options: dict[str, dict[str, JsonValue]] = {}
    for key, value in values.items():
        if key.startswith("model_settings."):
            options.setdefault(_model_of(key), {})[key.rpartition(".")[2]] = value
    builtin = {role: chain[0] for role, chain in chains.items() if role in BUILTIN_MODEL_ROLES}
    models = ModelNames(
        **builtin,  # pyright: ignore[reportArgumentType] - the keys are built-in role names, each a str field of ModelNames
        roles={role: chain[0] for role, chain in chains.items() if role not in BUILTIN_MODEL_ROLES},
        fallbacks={role: chain[1:] for role, chain in chains.items() if len(chain) > 1},
    )
    used = set(models.all_names())
    return models.model_copy(
        update={
            "options": {
                name: ModelOptions.model_validate(opts) for name, opts in options.items() if name in used
            }
        }
    )


def _label(origin: Origin | None, key: str) -> str:
    if origin is None or origin.source == "default":
        return key
    if origin.source in ("flag", "environment"):
        return f"{origin.where}"
    return f"{origin.where}: {key}"
