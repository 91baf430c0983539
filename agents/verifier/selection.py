"""Which tests to run first: the ones the task is about, and the ones near the code the patch changed.

Targeted tests are, in order: the plan's test targets, the test files the patch adds or changes,
and test files related to the changed modules — by name (`test_calc.py`, `calc_test.py` for
`calc.py`) or by import (`from pkg.calc import ...`, `import pkg.calc`, `from pkg import calc`).
They run as whole files, so a target the patch renamed still runs and a node id that no longer
exists does not make pytest refuse the whole selection.

A failure is blamed on the patch whatever the starting tree did when it is in a *task test*: a
plan target (a node id, or every test of a target file) or a test the patch adds or edits. Only
the test functions the patch touched count, not the rest of their file: a patch adding one test
beside a test that already failed must not be blamed for that old failure. Other failing tests
fail the patch only when they passed before (a regression).
"""

import ast
import os
import re
from dataclasses import dataclass, field
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
    edited_tests: dict[str, frozenset[str] | None] = field(default_factory=dict)
    """Per changed test file, the tests (`test_x`, `TestC::test_y`) the patch adds or edits; None
    when the file cannot be read as Python, and then every test in it counts as edited."""

    def is_task_test(self, test_id: str) -> bool:
        """Whether a failure of `test_id` is the patch's whatever the starting tree did."""
        file, _, name = test_id.partition("::")
        if file in self.changed_test_files:
            edited = self.edited_tests.get(file)
            if edited is None or not name or name.split("[")[0] in edited:
                return True
        # A target file that cannot be collected reports the file itself as the failing test.
        return any(
            _matches(test_id, target) or test_id == target.split("::")[0] for target in self.target_ids
        )


def _matches(test_id: str, target: str) -> bool:
    return test_id == target or test_id.startswith((target + "::", target + "["))


def _definitions(source: str) -> dict[str, str] | None:
    """Every function and method of `source` by its pytest name (`f`, `C::m`, `C::D::m`), with its
    source text, decorators included; None when `source` is not valid Python."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines()
    found: dict[str, str] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}::")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found[prefix + node.name] = "\n".join(lines[start - 1 : node.end_lineno])

    visit(tree.body, "")
    return found


def edited_tests(before: str, after: str) -> frozenset[str] | None:
    """The tests of `after` that `before` lacks or had with other source; None when `after` is not
    valid Python (every test of the file is then taken as edited). `before` is "" for a new file."""
    new = _definitions(after)
    if new is None:
        return None
    old = _definitions(before) or {}
    return frozenset(name for name, text in new.items() if old.get(name) != text)


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


def select_tests(
    root: Path,
    changes: list[FileChange],
    test_targets: list[str],
    *,
    before: dict[str, str] | None = None,
) -> Selection:
    """The targeted tests for `changes` on the patched tree at `root` (see the module docstring).

    `before` holds the starting text of the changed test files by path (absent: an added file);
    without it every test of a changed test file counts as edited."""
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
    edited: dict[str, frozenset[str] | None] = dict.fromkeys(changed_tests)
    if before is not None:
        for path in changed_tests:
            try:
                after = (root / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue  # unreadable: every test of it counts as edited
            edited[path] = edited_tests(before.get(path, ""), after)
    return Selection(
        edited_tests=edited,
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
