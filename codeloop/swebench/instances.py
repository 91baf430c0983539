"""SWE-bench instances: reading a file in SWE-bench's format and choosing the ones to run.

The file is a JSON list, JSON lines or Parquet (as the datasets library writes it), with the
fields exactly as published; FAIL_TO_PASS and PASS_TO_PASS may be JSON-encoded strings (the
published form) or lists.
"""

import json
import random
from pathlib import Path

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, field_validator

from codeloop.swebench.errors import InstanceFileError, UnknownInstance


class Instance(BaseModel):
    """One SWE-bench task instance; fields not named here are kept (`model_extra`)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    instance_id: str
    repo: str
    """OWNER/NAME on GitHub, e.g. `pallets/flask`."""
    base_commit: str
    patch: str = ""
    """The gold fix."""
    test_patch: str
    version: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    environment_setup_commit: str | None = None
    """The commit whose files the environment is built from; the base commit when absent."""
    problem_statement: str = ""

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _decode_list(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not a JSON list of test ids: {exc}") from None
        return list(value) if isinstance(value, tuple) else value

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int | float) else value

    @property
    def env_commit(self) -> str:
        return self.environment_setup_commit or self.base_commit

    def as_swebench(self) -> dict[str, JsonValue]:
        """The instance as the dict SWE-bench's own functions take (test lists as lists)."""
        return {**(self.model_extra or {}), **self.model_dump(exclude_none=False)}


def load_instances(path: Path) -> list[Instance]:
    """Every instance of `path` (JSON list, JSON lines or Parquet), in file order.

    Raises:
        InstanceFileError: the file cannot be read, is of no known format, or an instance is
            malformed or repeated (the message names its line or position and the field).
    """
    rows = _rows(path)
    instances: list[Instance] = []
    seen: set[str] = set()
    for where, row in rows:
        if not isinstance(row, dict):
            raise InstanceFileError(f"{path}: {where}: an instance must be a JSON object")
        try:
            instance = Instance.model_validate(row)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "instance"
            raise InstanceFileError(f"{path}: {where}: {field}: {first['msg']}") from None
        if instance.instance_id in seen:
            raise InstanceFileError(f"{path}: {where}: instance {instance.instance_id} appears twice")
        seen.add(instance.instance_id)
        instances.append(instance)
    if not instances:
        raise InstanceFileError(f"{path}: holds no instances")
    return instances


def _rows(path: Path) -> list[tuple[str, object]]:
    """(where, object) pairs: `line N` for JSON lines, `item N` for a JSON list or Parquet."""
    try:
        if path.suffix == ".parquet":
            return _parquet_rows(path)
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InstanceFileError(f"cannot read the instances file {path}: {exc}") from None
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise InstanceFileError(f"{path}: not valid JSON: {exc}") from None
        return [(f"item {i}", item) for i, item in enumerate(items, 1)]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((f"line {number}", json.loads(line)))
        except ValueError as exc:
            raise InstanceFileError(f"{path}: line {number}: not valid JSON: {exc}") from None
    return rows


def _parquet_rows(path: Path) -> list[tuple[str, object]]:
    import pyarrow
    import pyarrow.parquet

    try:
        table = pyarrow.parquet.read_table(path)
    except (OSError, pyarrow.ArrowException) as exc:
        raise InstanceFileError(f"{path}: not a readable Parquet file: {exc}") from None
    return [(f"row {i}", row) for i, row in enumerate(table.to_pylist(), 1)]


def select(
    instances: list[Instance],
    *,
    ids: list[str] | None = None,
    repo: str | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[Instance]:
    """The instances a run takes: those named by `ids` (all must exist), of `repo`, then a random
    `sample` of them (seeded: the same sample every time), in file order.

    Raises:
        UnknownInstance: an id of `ids` is not in `instances`, or `repo` has none.
    """
    chosen = instances
    if ids:
        known = {i.instance_id for i in instances}
        missing = [i for i in ids if i not in known]
        if missing:
            raise UnknownInstance(f"no instance {', '.join(missing)} in the instances file")
        wanted = set(ids)
        chosen = [i for i in chosen if i.instance_id in wanted]
    if repo:
        chosen = [i for i in chosen if i.repo == repo]
        if not chosen:
            repos = sorted({i.repo for i in instances})
            raise UnknownInstance(f"no instance of --repo {repo}; the file has {', '.join(repos)}")
    if sample is not None and sample < len(chosen):
        picked = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [inst for i, inst in enumerate(chosen) if i in picked]
    return chosen
