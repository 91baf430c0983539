"""The configuration center's document: what it may hold, how it is checked, and what it means
for a task.

The document has the keys of the configuration files that a fleet's operators set for every
task — `[models]`, `[model_settings."NAME"]`, `[budgets]`, `[pipelines]`, `[verification]`,
`[sandbox]` — plus `[quotas.default]` and `[quotas.NAME]` (`agents.quotas.Quota`). What a
process grants or where it sends data (`[tools]`, `[telemetry]`, `[environment]`) stays in each
machine's files: the center changes what tasks run with, never what a process may do. Quotas live
only here: a repository's `codeloop.toml` or a user's `config.toml` naming `[quotas]` is refused
(a repository never raises its own quota).

Precedence, highest first: command line (and the submitter's environment) > the center > the
repository file > the user file > defaults. The submitter resolves its own layers into the task
and lists the keys its command line pinned (`TaskSubmitted.pinned`); the orchestrator that claims
the task puts the center's current revision between the two (`settle`), so a push reaches the next
task on every machine without a restart and a running task keeps the revision it started with.

A push is checked as `codeloop config check` checks files (unknown keys, model names, credentials
in the pusher's environment, prices for a cost budget, pipelines) and refused when a value looks
like a credential: keys never live in the center.
"""

import tomllib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from pydantic import JsonValue, ValidationError

from agents.messages import ModelNames, TaskSubmitted
from agents.orchestrator.center import Settled
from agents.quotas import Quota, quota_for
from codeloop.config.errors import ConfigError
from codeloop.config.files import (
    ConfigFile,
    FileConfig,
    RoleName,
    _anchored,
    _describe,
)
from codeloop.config.settings import Settings, _file_layer, _Layer, _merge
from redaction import redact_text

CENTER_SECTIONS = ("models", "model_settings", "budgets", "pipelines", "verification", "sandbox", "quotas")
"""The tables a center document may have."""


class CenterConfig(FileConfig):
    """A center document: the files' schema for the shared sections, plus quotas."""

    quotas: dict[RoleName, Quota] = {}
    """`default` or a principal's name -> its quota."""


_FILE_ONLY = ("tools", "telemetry", "environment")


def parse_document(text: str, *, label: str, base: Path) -> CenterConfig:
    """Read and check a center document (TOML text); `label` names it in errors, `base` anchors
    relative `function:` paths.

    Raises:
        ConfigError: not TOML, an unknown or file-only key, a wrong value, or a value that looks
            like a credential (the message names the key).
    """
    try:
        data: object = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{label}: not valid TOML: {exc}") from None
    for section in _FILE_ONLY:
        if section in data:
            raise ConfigError(
                f"{label}: [{section}] is not a configuration center key: it says what a process may "
                f"do or where it sends data, and stays in each machine's files; the center holds "
                f"{', '.join(CENTER_SECTIONS)}"
            )
    try:
        config = CenterConfig.model_validate(data)
    except ValidationError as exc:
        message = _describe(exc, Path(label), text, ())
        if "unknown key" in message and "; allowed here:" in message and "." not in message.split("'")[1]:
            message = message.split("; allowed here:")[0] + f"; allowed here: {', '.join(CENTER_SECTIONS)}"
        raise ConfigError(message) from None
    for key, value in _strings(data):
        if redact_text(value) != value:
            raise ConfigError(
                f"{label}: {key} looks like a credential; credentials never live in the configuration "
                "center (each worker reads its keys from its own environment): remove it"
            )
    anchored = _anchored(config, base)  # a model_copy: still a CenterConfig
    assert isinstance(anchored, CenterConfig)
    return anchored


def _strings(value: object, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every string in the parsed TOML with its dotted key (list items as KEY[i])."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{prefix}[{index}]")
    elif isinstance(value, str):
        yield prefix, value


def center_settings(config: CenterConfig, *, label: str = "center") -> Settings:
    """The document alone over the defaults, as `config check` sees a file (for the push's check).

    Raises:
        ConfigError: a value out of range.
    """
    return _merge([_file_layer("center", ConfigFile(path=Path(label), table=None, config=config))])


def flat_values(config: CenterConfig) -> dict[str, JsonValue]:
    """Every key the document sets, dotted (`budgets.max_steps`, `quotas.alice.tokens_per_day`)."""
    flat: dict[str, JsonValue] = {}
    for section, value in config.model_dump(exclude_none=True, exclude_defaults=True).items():
        _flatten(flat, section, value)
    return flat


def _flatten(flat: dict[str, JsonValue], key: str, value: JsonValue) -> None:
    if isinstance(value, dict) and value:
        for name, item in value.items():
            _flatten(flat, f"{key}.{name}", item)
    elif value not in ({}, None):
        flat[key] = value


def changed_keys(before: CenterConfig | None, after: CenterConfig) -> list[str]:
    """The dotted keys whose values differ between two documents, sorted."""
    old = flat_values(before) if before is not None else {}
    new = flat_values(after)
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


# ── a task under the center ─────────────────────────────────────────────────────────────────────
def settle(task: TaskSubmitted, config: CenterConfig, *, revision: int, principal: str) -> Settled:
    """`task` with `config` applied below the keys its submitter pinned, and `principal`'s quota."""
    pinned = set(task.pinned)
    center = _file_layer(
        "center", ConfigFile(path=Path(f"center revision {revision}"), table=None, config=config)
    )
    top = _Layer(source="flag")
    below = _Layer(source="project file")
    for role, chain in _chains(task.models).items():
        (top if f"models.{role}" in pinned else below).models[role] = chain
    for name, options in task.models.options.items():
        for option, value in options.model_dump(exclude_none=True).items():
            below.values[f"model_settings.{name}.{option}"] = value
    for key, value in task.budgets.model_dump().items():
        if value is not None:
            (top if f"budgets.{key}" in pinned else below).values[f"budgets.{key}"] = value
    try:
        merged = _merge([top, center, below])
    except ConfigError:  # a pinned budget and the center disagree on nothing a task can run with
        merged = None
    require = task.require_verified or config.verification.require == "passed"
    updated = task
    if merged is not None:
        updated = task.model_copy(
            update={"models": merged.models, "budgets": merged.budgets, "require_verified": require}
        )
    found = quota_for(config.quotas, principal)
    quota, key = found if found else (None, "")
    return Settled(task=updated, revision=revision, quota=quota, quota_key=key)


def _chains(models: ModelNames) -> dict[str, list[str]]:
    """Each role the task names a model for (`default` included): its model and fallbacks."""
    own = {"default": models.default, "planner": models.planner, "coder": models.coder, **models.roles}
    return {role: [name, *models.fallbacks.get(role, [])] for role, name in own.items() if name}


@lru_cache(maxsize=8)
def parsed_revision(text: str, base: str) -> CenterConfig | None:
    """A stored revision's document, parsed once per process; None when it does not read (a
    client that skipped `codeloop config push`'s checks wrote it)."""
    try:
        return parse_document(text, label="the configuration center", base=Path(base))
    except ConfigError:
        return None
