"""Which tests to run first: the ones the task is about, and the ones near the code the patch changed.

Targeted tests are, in order: the plan's test targets, the tests the task's text names, the test
files the patch adds or changes, and test files related to the changed modules — by name
(`test_calc.py`, `calc_test.py` for `calc.py`) or by import (`from pkg.calc import ...`, `import
pkg.calc`, `from pkg import calc`). They run as whole files, so a target the patch renamed still
runs and a node id that no longer exists does not make pytest refuse the whole selection.

A failure is blamed on the patch whatever the starting tree did when it is in a *task test*: a
plan target (a node id, or every test of a target file), a test the task's text names (a node id
`tests/test_ops.py::test_mean`, a test file, or a test function `test_mean`), or a test the patch
adds or edits. The verifier also holds the patch to the other tests of a test file it changed
(see `agents.roles.verifier.testing`). Other failing tests fail the patch only when they passed before
(a regression).
"""

import ast
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from agents.roles.verifier.patchset import FileChange
from agents.roles.verifier.test_modules import is_test_module, python_files
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
    named: "NamedTests" = field(default_factory=lambda: NamedTests())
    """The tests the task's text names."""

    def is_task_test(self, test_id: str, *, whole_files: bool = True) -> bool:
        """Whether a failure of `test_id` is the patch's whatever the starting tree did.
        `whole_files=False`: a test file the plan or the task names only says where to look, and
        makes none of its tests the task's (what executes the changed code decides that)."""
        file, _, name = test_id.partition("::")
        if file in self.changed_test_files:
            edited = self.edited_tests.get(file)
            if edited is None or not name or name.split("[")[0] in edited:
                return True
        if self.named.names(test_id, whole_files=whole_files):
            return True
        if not whole_files:
            return any(matches(test_id, target) for target in self.target_ids if "::" in target)
        # A target file that cannot be collected reports the file itself as the failing test.
        return any(matches(test_id, target) or test_id == target.split("::")[0] for target in self.target_ids)

    @property
    def target_files(self) -> list[str]:
        """The files of the plan's targets and of the tests the task names."""
        return list(dict.fromkeys([t.split("::")[0] for t in self.target_ids] + self.named.files))


@dataclass(frozen=True)
class NamedTests:
    """The tests a task's text names: whole test files, node ids, and bare test function names
    (`test_mean`), each resolved against the repository's test files."""

    whole_files: tuple[str, ...] = ()
    node_ids: tuple[str, ...] = ()
    functions: frozenset[str] = frozenset()
    files: list[str] = field(default_factory=list)
    """Every test file holding a named test, to run with the targeted tests."""

    def names(self, test_id: str, *, whole_files: bool = True) -> bool:
        file, _, name = test_id.partition("::")
        if (whole_files and file in self.whole_files) or any(matches(test_id, n) for n in self.node_ids):
            return True
        return bool(name) and name.split("::")[-1].split("[")[0] in self.functions


_SUITE_WORDS = re.compile(
    r"\b(?:(?:the|whole|full|entire|test)\s+)*(?:test\s+)?suite\s+(?:passes|pass|is\s+green|succeeds|runs\s+green)"
    r"|\ball\s+(?:of\s+)?(?:the\s+)?tests\s+(?:pass|are\s+passing|succeed|are\s+green)"
    r"|\b(?:every|each)\s+test\s+pass(?:es)?\b"
    r"|\b(?:make|get|keep|turn)s?\s+(?:the\s+)?(?:ci|build|tests|test\s+suite|suite)\s+(?:green|pass|passing)\b"
    r"|\bci\s+(?:is\s+|goes\s+|turns\s+)?green\b"
    r"|\bno\s+(?:more\s+)?failing\s+tests\b",
    re.I,
)


def asks_for_green_suite(text: str) -> bool:
    """Whether the task's words ask for the whole test suite to pass ("so the test suite passes",
    "all tests pass", "make CI green"): then every failing test is the task's."""
    return bool(_SUITE_WORDS.search(text[:MAX_SCANNED_BYTES]))


_NAMED_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.py)(::[\w:\[\]./-]*\w\]?)?")
_NAMED_FUNCTION = re.compile(r"(?<![\w.:/])(test_\w+)\b(?!\.\w)")


def named_tests(text: str, every: list[str], root: Path) -> NamedTests:
    """The tests `text` names among the repository's test modules `every` (see `NamedTests`). A
    path matches a test file by its repository path or, when it is a bare name, by file name."""
    by_name: dict[str, list[str]] = {}
    for path in every:
        by_name.setdefault(PurePosixPath(path).name, []).append(path)
    whole, ids = [], []
    for match in _NAMED_PATH.finditer(text[:MAX_SCANNED_BYTES]):
        path, node = match.group(1).removeprefix("./"), match.group(2)
        files = [path] if path in every else by_name.get(path, []) if "/" not in path else []
        for file in files:
            (ids.append(file + node) if node else whole.append(file))
    functions = frozenset(_NAMED_FUNCTION.findall(text[:MAX_SCANNED_BYTES]))
    files = [*whole, *(i.split("::")[0] for i in ids)]
    if functions:
        files += _defining(root, [f for f in every if f not in files], functions)
    return NamedTests(
        whole_files=tuple(dict.fromkeys(whole)),
        node_ids=tuple(dict.fromkeys(ids)),
        functions=functions,
        files=list(dict.fromkeys(files)),
    )


def _defining(root: Path, candidates: list[str], functions: frozenset[str]) -> list[str]:
    """The test files among `candidates` that define one of `functions`."""
    pattern = re.compile(rf"^\s*(?:async\s+)?def\s+(?:{'|'.join(map(re.escape, sorted(functions)))})\b", re.M)
    found = []
    for path in candidates:
        try:
            with open(root / path, encoding="utf-8", errors="replace") as handle:
                text = handle.read(MAX_SCANNED_BYTES)
        except OSError:
            continue
        if pattern.search(text):
            found.append(path)
            if len(found) >= MAX_RELATED_FILES:
                break
    return found


def matches(test_id: str, target: str) -> bool:
    """`test_id` is the test (or class) `target` names, or one of its parametrizations."""
    return test_id == target or test_id.startswith((target + "::", target + "["))


def definition_spans(source: str) -> dict[str, tuple[int, int]] | None:
    """Every function and method of `source` by its pytest name (`f`, `C::m`, `C::D::m`) -> its
    first line (decorators included) and last line; None when `source` is not valid Python."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found: dict[str, tuple[int, int]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}::")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found[prefix + node.name] = (start, node.end_lineno or node.lineno)

    visit(tree.body, "")
    return found


def _definitions(source: str) -> dict[str, str] | None:
    """Every function and method of `source` by its pytest name, with its source text
    (`definition_spans`); None when `source` is not valid Python."""
    spans = definition_spans(source)
    if spans is None:
        return None
    lines = source.splitlines()
    return {name: "\n".join(lines[first - 1 : last]) for name, (first, last) in spans.items()}


def edited_tests(before: str, after: str) -> frozenset[str] | None:
    """The tests of `after` that `before` lacks or had with other source; None when `after` is not
    valid Python (every test of the file is then taken as edited). `before` is "" for a new file."""
    new = _definitions(after)
    if new is None:
        return None
    old = _definitions(before) or {}
    return frozenset(name for name, text in new.items() if old.get(name) != text)


def test_files(root: Path, patterns: Sequence[str] | None = None) -> list[str]:
    """Test modules under `root` (by `patterns`, else the repository's `python_files`), skipping
    virtualenvs and hidden directories."""
    patterns = python_files(root) if patterns is None else patterns
    found: list[str] = []
    for here, dirs, names in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
        )
        for name in sorted(names):
            rel = os.path.relpath(os.path.join(here, name), root).replace(os.sep, "/")
            if is_test_module(rel, patterns):
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


def importing_tests(root: Path, sources: list[str], every: list[str]) -> list[str]:
    """The test modules of `every` that import one of the modules at `sources` (or are named after
    it), at most `MAX_RELATED_FILES`."""
    modules = [_module_names(path) for path in sources]
    return _related(root, every, modules) if modules else []


def select_tests(
    root: Path,
    changes: list[FileChange],
    test_targets: list[str],
    *,
    before: dict[str, str] | None = None,
    task_text: str = "",
    test_patterns: Sequence[str] | None = None,
) -> Selection:
    """The targeted tests for `changes` on the patched tree at `root` (see the module docstring).

    `before` holds the starting text of the changed test files by path (absent: an added file);
    without it every test of a changed test file counts as edited. `task_text`: the task's words,
    for the tests it names. `test_patterns`: the repository's test module names, when known
    (else read, `test_modules.python_files`)."""
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
    patterns = python_files(root) if test_patterns is None else test_patterns
    changed_tests = [
        c.path
        for c in changes
        if c.kind != "deleted" and is_test_module(c.path, patterns) and (root / c.path).is_file()
    ]
    every = test_files(root, patterns)
    named = named_tests(task_text, every, root) if task_text else NamedTests()
    files += named.files
    files += changed_tests
    modules = [_module_names(c.path) for c in changes if c.is_python and not c.is_test]
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
        named=named,
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
