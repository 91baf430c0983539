"""Environment and test specs: SWE-bench's own table, plus specs a user gives (`--specs FILE`).

A spec is SWE-bench's dict for one (repository, version): `python`, `packages`,
`pip_packages`, `pre_install`, `install`, `test_cmd`, `eval_commands`. A `--specs` file (JSON or
TOML) maps `OWNER/NAME` → version → spec for repositories SWE-bench does not know, and may add
`log_parser` (one of SWE-bench's parsers, named as a repository it knows, e.g. `pytest-dev/pytest`,
or as the function, e.g. `parse_log_pytest`) and `requirements_paths` (for `packages =
"requirements.txt"`). They are registered in swebench's own tables, so its grading reads them
exactly as it reads its own.
"""

import json
import tomllib
from pathlib import Path

from pydantic import JsonValue

from codeloop.swebench.errors import SpecError
from codeloop.swebench.instances import Instance
from codeloop.swebench.official import LogParser, Spec, parsers_table, specs_table, swebench

_REQUIRED = ("python", "test_cmd")
_KNOWN = {
    "python",
    "packages",
    "pip_packages",
    "pre_install",
    "install",
    "test_cmd",
    "eval_commands",
    "log_parser",
    "requirements_paths",
    "nano_cpus",
    "no_use_env",
    "env_patches",
}


def spec_for(instance: Instance) -> Spec:
    """The spec of the instance's (repository, version).

    Raises:
        SpecError: neither SWE-bench's table nor a `--specs` file has it.
    """
    table = specs_table()
    versions = table.get(instance.repo)
    if versions is None:
        raise SpecError(
            f"{instance.instance_id}: SWE-bench 4.1.0 has no spec for repository {instance.repo}; "
            "give one with --specs FILE (docs/swebench.md)"
        )
    spec = versions.get(instance.version)
    if spec is None:
        raise SpecError(
            f"{instance.instance_id}: no spec for {instance.repo} version {instance.version} "
            f"(known: {', '.join(sorted(versions))}); give one with --specs FILE"
        )
    if instance.repo not in parsers_table():
        raise SpecError(f"{instance.instance_id}: no log parser for {instance.repo}; name one in --specs")
    return spec


_registered: dict[str, dict[str, dict[str, JsonValue]]] = {}
"""Repository -> version -> spec, as the `--specs` files of this process gave them."""


def registered_specs() -> dict[str, JsonValue]:
    """The specs registered from `--specs` in this process, as a specs file holds them (sent
    along to remote workers)."""
    return {repo: dict(versions) for repo, versions in _registered.items()}


def load_extra_specs(path: Path) -> int:
    """Register the specs of `path` in SWE-bench's tables; returns how many were added.

    Raises:
        SpecError: unreadable, not a mapping of repository → version → spec, a spec lacking
            `python` or `test_cmd`, an unknown key, or a `log_parser` SWE-bench does not have.
    """
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"cannot read the specs file {path}: {exc}") from None
    return register_specs(data, where=str(path))


def register_specs(data: JsonValue, *, where: str) -> int:
    """Register specs given as data (what a `--specs` file holds); see `load_extra_specs`."""
    path = Path(where)
    if not isinstance(data, dict) or not data:
        raise SpecError(f"{path}: must map OWNER/NAME to versions to specs")
    added = 0
    for repo, versions in data.items():
        if "/" not in repo or not isinstance(versions, dict) or not versions:
            raise SpecError(f"{path}: {repo!r}: must be OWNER/NAME mapping versions to specs")
        for version, spec in versions.items():
            _registered.setdefault(repo, {})[str(version)] = _register(path, repo, str(version), spec)
            added += 1
    return added


def _register(path: Path, repo: str, version: str, spec: JsonValue) -> dict[str, JsonValue]:
    """Register one spec in SWE-bench's tables; returns it as given.

    Raises:
        SpecError: not a table, a required key missing, an unknown key, or a bad `log_parser` or
            `requirements_paths`.
    """
    where = f"{path}: {repo} {version}"
    if not isinstance(spec, dict):
        raise SpecError(f"{where}: a spec must be a table/object")
    missing = [k for k in _REQUIRED if k not in spec]
    if missing:
        raise SpecError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(spec) - _KNOWN)
    if unknown:
        raise SpecError(f"{where}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(_KNOWN))})")
    modules = swebench()
    parser = _parser(where, spec.get("log_parser", "parse_log_pytest"))
    paths = spec.get("requirements_paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise SpecError(f"{where}: requirements_paths must be a list of paths")
    given = spec
    spec = {k: v for k, v in spec.items() if k not in ("log_parser", "requirements_paths")} | {
        "python": str(spec["python"])
    }
    specs_table().setdefault(repo, {})[version] = spec
    parsers_table()[repo] = parser
    modules.constants.MAP_REPO_TO_EXT.setdefault(repo, "py")
    if paths:
        known = modules.constants.MAP_REPO_TO_REQS_PATHS.setdefault(repo, [])
        known += [p for p in paths if p not in known]
    return given


def _parser(where: str, name: JsonValue) -> LogParser:
    """SWE-bench's parser named by a repository it knows or by its function name."""
    parsers = parsers_table()
    if isinstance(name, str) and name in parsers:
        return parsers[name]
    module = swebench().log_parsers
    for parser in parsers.values():
        if parser.__name__ == name:
            return parser
    if isinstance(name, str) and callable(getattr(module, name, None)):
        return getattr(module, name)
    names = sorted({p.__name__ for p in parsers.values()})
    raise SpecError(f"{where}: log_parser {name!r} is none of SWE-bench's ({', '.join(names[:8])}, ...)")


def directives(instance: Instance) -> list[str]:
    """The test files (or Django modules) the official harness passes to the test command."""
    return swebench().test_spec_python.get_test_directives(instance.as_swebench())


def needs_cpus(spec: Spec) -> int:
    """CPUs the official container gets for this spec (`nano_cpus`), else 1."""
    nano_cpus = spec.get("nano_cpus", 0)
    return max(1, int(nano_cpus) // 1_000_000_000 if isinstance(nano_cpus, int | float | str) else 1)
