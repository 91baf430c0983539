"""Which files of a repository are test modules: pytest's `python_files` as the repository sets it.

pytest collects `test_*.py` and `*_test.py` unless the configuration says otherwise, and some
projects do: pytest's own repository adds `testing/*/*.py`, so `testing/python/fixtures.py` holds
tests. The verifier must read them the same way — a changed test module's tests are the task's,
and its lines are no source to measure coverage of — or a patch's edited tests go unseen.

The configuration is read from the file pytest would take it from, in pytest's order: the first
of `pytest.ini`, `pyproject.toml` (`[tool.pytest.ini_options]`), `tox.ini` (`[pytest]`) and
`setup.cfg` (`[tool:pytest]`) at the repository's root that has a pytest section. The files are
read, never run.
"""

import configparser
import tomllib
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

DEFAULT_PATTERNS: tuple[str, ...] = ("test_*.py", "*_test.py")
"""pytest's default `python_files`."""
_INI_SECTIONS = (("pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))


def python_files(root: Path) -> tuple[str, ...]:
    """The test module patterns of the repository at `root` (`DEFAULT_PATTERNS` when it sets none,
    or its configuration does not read)."""
    for name, section in (_INI_SECTIONS[0], ("pyproject.toml", ""), *_INI_SECTIONS[1:]):
        path = root / name
        if not path.is_file():
            continue
        found = _from_toml(path) if name == "pyproject.toml" else _from_ini(path, section)
        if found is not None:
            return found or DEFAULT_PATTERNS
    return DEFAULT_PATTERNS


def _from_ini(path: Path, section: str) -> tuple[str, ...] | None:
    """`python_files` of the file's pytest section: () when it sets none, None without a section
    (pytest then looks at the next file)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return None
    if not parser.has_section(section):
        # pytest.ini is pytest's whatever it holds.
        return () if path.name == "pytest.ini" else None
    return tuple(parser.get(section, "python_files", fallback="").split())


def _from_toml(path: Path) -> tuple[str, ...] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
        return None
    options = data.get("tool", {}).get("pytest", {}).get("ini_options")
    if not isinstance(options, dict):
        return None
    value = options.get("python_files", ())
    return tuple(value.split()) if isinstance(value, str) else tuple(str(v) for v in value)


def is_test_module(path: str, patterns: Sequence[str] = DEFAULT_PATTERNS) -> bool:
    """Whether pytest would collect the root-relative `path` as a test module under `patterns`:
    a pattern without `/` matches the file's name, one with `/` the end of its path (as pytest's
    own matching does for a relative pattern)."""
    pure = PurePosixPath(path)
    if pure.suffix != ".py":
        return False
    return any(
        fnmatch(f"/{pure.as_posix()}", f"*/{pattern}") if "/" in pattern else fnmatch(pure.name, pattern)
        for pattern in patterns
    )
