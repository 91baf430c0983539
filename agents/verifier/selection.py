"""Which tests to run first: the ones the task is about, and the ones near the code the patch changed.

Targeted tests are, in order: the plan's test targets, the test files the patch adds or changes,
and test files related to the changed modules — by name (`test_calc.py`, `calc_test.py` for
`calc.py`) or by import (`from pkg.calc import ...`, `import pkg.calc`, `from pkg import calc`).
They run as whole files, so a target the patch renamed still runs and a node id that no longer
exists does not make pytest refuse the whole selection.

A failure is blamed on the patch whatever the starting tree did when it is in a *task test*: a
plan target (a node id, or every test of a target file) or a test in a file the patch changed.
Other targeted tests fail the patch only when they passed before (a regression).
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agents.verifier.patchset import FileChange
from layout import TREE_DIR

SKIP_DIRS = frozenset(
    {".git", TREE_DIR, "__pycache__", "node_modules", ".tox", ".venv", "venv", "env", "build", "dist"}
)
MAX_SCANNED_FILES = 5000
MAX_RELATED_FILES = 20
MAX_SCANNED_BYTES = 200_000
PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


@dataclass(frozen=True)
class Selection:
    """The targeted run and what in it is a task test."""

    files: list[str]
    """Test files to run first, relative to the root."""
    target_ids: list[str]
    """Plan targets (node ids or files) that exist on the patched tree."""
    changed_test_files: list[str]
    """Test files the patch added or changed (conftest.py excluded), present after the patch."""
    missing_targets: list[str]
    """Plan targets whose file does not exist on the patched tree."""
    covers_suite: bool = False
    """The targeted files are every test module of the repository (and no pytest option collects
    other files): the whole suite would only run them again."""

    def is_task_test(self, test_id: str) -> bool:
        """Whether a failure of `test_id` is the patch's whatever the starting tree did."""
        file = test_id.split("::")[0]
        if file in self.changed_test_files:
            return True
        # A target file that cannot be collected reports the file itself as the failing test.
        return any(
            _matches(test_id, target) or test_id == target.split("::")[0] for target in self.target_ids
        )


def _matches(test_id: str, target: str) -> bool:
    return test_id == target or test_id.startswith((target + "::", target + "["))


def is_test_module(path: str) -> bool:
    """pytest's default test module names: `test_*.py`, `*_test.py`."""
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def test_files(root: Path) -> list[str]:
    """Test modules under `root` (pytest's default names), skipping virtualenvs and hidden directories."""
    found: list[str] = []
    for here, dirs, names in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
        )
        for name in sorted(names):
            rel = os.path.relpath(os.path.join(here, name), root).replace(os.sep, "/")
            if is_test_module(rel):
                found.append(rel)
                if len(found) >= MAX_SCANNED_FILES:
                    return found
    return found


def _module_names(path: str) -> tuple[str, str]:
    """(last name, dotted name) of the module at `path` (`pkg/calc.py` → `calc`, `pkg.calc`)."""
    pure = PurePosixPath(path)
    parts = list(pure.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if parts and parts[0] in ("src", "lib"):
        parts = parts[1:]
    return (parts[-1] if parts else "", ".".join(parts))


def _related(root: Path, candidates: list[str], modules: list[tuple[str, str]]) -> list[str]:
    related = []
    patterns = []
    for last, dotted in modules:
        if not last:
            continue
        parent, _, _ = dotted.rpartition(".")
        names = [re.escape(dotted)] + (
            [rf"{re.escape(parent)}\s+import\s+(?:\(?[\w\s,]*\b)?{re.escape(last)}\b"] if parent else []
        )
        patterns.append((last, re.compile(rf"^\s*(?:from|import)\s+(?:{'|'.join(names)})\b", re.M)))
    for path in candidates:
        stem = PurePosixPath(path).stem
        if any(stem in (f"test_{last}", f"{last}_test") for last, _ in patterns):
            related.append(path)
        else:
            try:
                with open(root / path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read(MAX_SCANNED_BYTES)
            except OSError:
                continue
            if any(pattern.search(text) for _, pattern in patterns):
                related.append(path)
        if len(related) >= MAX_RELATED_FILES:
            break
    return related


def select_tests(root: Path, changes: list[FileChange], test_targets: list[str]) -> Selection:
    """The targeted tests for `changes` on the patched tree at `root` (see the module docstring)."""
    target_ids, missing = [], []
    files: list[str] = []
    for target in test_targets:
        target = target.strip().removeprefix("./")
        file = target.split("::")[0]
        if file and (root / file).exists():
            target_ids.append(target)
            files.append(file)
        elif file:
            missing.append(target)
    changed_tests = [
        c.path
        for c in changes
        if c.kind != "deleted" and is_test_module(c.path) and (root / c.path).is_file()
    ]
    files += changed_tests
    modules = [_module_names(c.path) for c in changes if c.is_python and not c.is_test]
    every = test_files(root)
    if modules:
        files += _related(root, [f for f in every if f not in files], modules)
    files = list(dict.fromkeys(files))
    return Selection(
        files=files,
        target_ids=target_ids,
        changed_test_files=changed_tests,
        missing_targets=missing,
        covers_suite=bool(every)
        and len(every) < MAX_SCANNED_FILES
        and set(every) <= set(files)
        and not _collects_more(root),
    )


def _collects_more(root: Path) -> bool:
    """Whether pytest's configuration may collect files beyond the default test module names."""
    for name in PYTEST_CONFIGS:
        try:
            text = (root / name).read_text(errors="replace")
        except OSError:
            continue
        if any(option in text for option in ("python_files", "doctest", "testpaths")):
            return True
    return (root / "conftest.py").is_file() and "pytest_collect_file" in (root / "conftest.py").read_text(
        errors="replace"
    )
