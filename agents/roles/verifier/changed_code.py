"""The code a patch changes, as lines of the starting tree a test can execute.

A test is the task's when, on the starting tree, it executes a line the patch changes or deletes
(`agents.roles.verifier.execution`). Lines are the starting tree's, since that is where coverage
measured them. Per changed Python file that existed there, a `Probe`:

- a deleted or replaced line counts itself — unless it is part of a function's header (its
  decorators, `def` line, signature), which runs once at import: then the function's body counts,
  so changing a signature makes the tests that call the function the task's;
- an added line counts its enclosing function's body on the starting tree (the function holding
  the line before the insertion); at the top of the module it counts the whole module, for the
  tests that execute any of it (its lines executed at import, by everyone, do not count then);
- an added top-level `import` counts nothing when the patch changes other lines of the file: it
  serves the code that uses it, and a module imported everywhere (as a test runner's plugins are
  by its own tests) would otherwise make every test the task's; alone, it counts the whole module;
- except an added line that takes the place of removed ones (`_in_place_of`): where the removed
  run starts with a statement every arrival executes, and the added lines stay in its block (none
  dedented out of it), only a test reaching that statement can reach them — the removed lines
  count, not the whole function (a test that calls the function but returns before the replaced
  statement is not the task's);
- `at_import`: the patch adds or changes a top-level statement that runs at import (not a `def`
  or `class` line, not a docstring): its effect reaches every test that imports the module, so the
  whole suite is run with the patch.

What coverage cannot follow (`Probes.unmeasured`): a changed non-Python file (data, templates,
configuration), except documentation; the whole suite then runs with the patch. Files the patch
adds have no starting lines: they are reached through changed lines elsewhere, or through the
tests the patch adds.
"""

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from agents.roles.verifier.patchset import FileChange
from agents.roles.verifier.test_modules import DEFAULT_PATTERNS, is_test_module

INERT_SUFFIXES = frozenset({".md", ".rst", ".txt", ".adoc"})
"""Documentation: a change to it cannot change what a test executes (doctests of .txt files are
rare enough to leave to the suite's own runs)."""
INERT_DIRS = frozenset({"doc", "docs", "changelog", "changes", "changelog.d", "news"})


@dataclass(frozen=True)
class Probe:
    """The starting-tree lines of one changed file whose execution makes a test the task's."""

    path: str
    """The file's path on the starting tree."""
    lines: frozenset[int]
    """Lines whose execution by a test (or at import, for everyone) counts."""
    module_wide: bool = False
    """An addition at the top of the module: a test executing any line of it counts, but not the
    module's import."""
    at_import: bool = False
    """The patch changes a statement that runs at import (see the module docstring)."""


@dataclass(frozen=True)
class Probes:
    """Every probe of a patch, and what coverage cannot follow."""

    probes: list[Probe] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)
    """Changed files whose effect no coverage shows (non-Python, not documentation)."""

    @property
    def paths(self) -> list[str]:
        return [p.path for p in self.probes]


def _inert(path: str) -> bool:
    pure = PurePosixPath(path)
    return pure.suffix.lower() in INERT_SUFFIXES or any(
        part.lower() in INERT_DIRS for part in pure.parts[:-1]
    )


@dataclass(frozen=True)
class _Function:
    start: int
    """First line, decorators included."""
    def_line: int
    body_start: int
    end: int


def _functions(source: str) -> list[_Function] | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found.append(_Function(start, node.lineno, node.body[0].lineno, node.end_lineno or node.lineno))
    return found


def _innermost(functions: list[_Function], line: int) -> _Function | None:
    holding = [f for f in functions if f.start <= line <= f.end]
    return max(holding, key=lambda f: f.start) if holding else None


def _runs_at_import(source: str, lines: set[int]) -> bool:
    """Whether any of `lines` of `source` is part of a top-level statement (or a class body's)
    that executes at import: anything but a function, a class line, a docstring."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return bool(lines)

    def body(statements: list[ast.stmt]) -> bool:
        for index, node in enumerate(statements):
            span = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            if not span & lines:
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorators = {
                    ln for d in node.decorator_list for ln in range(d.lineno, (d.end_lineno or 0) + 1)
                }
                if decorators & lines:
                    return True
                continue
            if isinstance(node, ast.ClassDef):
                if node.lineno in lines or body(node.body):
                    return True
                continue
            docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            if not docstring:
                return True
        return False

    return body(tree.body)


def _is_code(line: str) -> bool:
    """A line that is neither blank nor only a comment."""
    return bool(line.strip()) and not line.strip().startswith("#")


def _top_level_imports(source: str) -> set[int]:
    """The lines of `source`'s top-level `import` statements."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {
        line
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }


def _always_traced(node: ast.stmt) -> bool:
    """Whether executing `node` always reports its first line to a line tracer (coverage). Not so
    for what compiles to nothing or is reported elsewhere: a docstring or other constant
    expression, `global`, a bare annotation, a constant `if`/`while` test, `try:` (no instruction
    of its own on newer Pythons), a decorated `def` or `class` (reported at its decorator)."""
    if isinstance(node, ast.Expr):
        return not isinstance(node.value, ast.Constant)
    if isinstance(node, ast.AnnAssign):
        return node.value is not None
    if isinstance(node, (ast.If, ast.While)):
        return not isinstance(node.test, ast.Constant)
    return isinstance(
        node,
        (
            ast.Assign,
            ast.AugAssign,
            ast.Return,
            ast.Raise,
            ast.Assert,
            ast.Delete,
            ast.Pass,
            ast.Break,
            ast.Continue,
            ast.For,
            ast.AsyncFor,
            ast.With,
            ast.AsyncWith,
            ast.Import,
            ast.ImportFrom,
        ),
    )


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _in_place_of(change: FileChange, before: str) -> set[int]:
    """The removed lines that additions directly follow and stand in place of: the last line of
    a run of removed lines whose first line starts a statement `_always_traced`, when none of the
    added lines after it is dedented out of that statement's block. Control reaches such added
    lines only where it reached the removed statement, so a test that never executed it on the
    starting tree cannot execute them either."""
    try:
        tree = ast.parse(before)
    except (SyntaxError, ValueError):
        return set()
    traced = {node.lineno for node in ast.walk(tree) if isinstance(node, ast.stmt) and _always_traced(node)}
    removed = dict(change.removed)
    texts = dict(change.added)
    following: dict[int, list[str]] = {}
    for new_line, anchor in change.anchors:
        following.setdefault(anchor, []).append(texts.get(new_line, ""))
    found = set()
    for anchor, added in following.items():
        if anchor not in removed:
            continue
        first = anchor
        while first - 1 in removed:
            first -= 1
        # An `elif` is the `if`'s, not a statement of its block: a test taking an earlier branch
        # never executes it, yet reaches what replaces it at that indentation after the `if`.
        if first not in traced or removed[first].lstrip().startswith("elif"):
            continue
        level = _indent(removed[first])
        code = [t for t in added if t.strip() and not t.strip().startswith("#")]
        if all(_indent(t) >= level for t in code):
            found.add(anchor)
    return found


def probe(change: FileChange, before: str, after: str) -> Probe:
    """The probe of one changed Python file, from its text on the starting tree and with the patch."""
    assert change.old_path is not None
    functions = _functions(before)
    if functions is None:  # the starting file does not parse: every line of it counts
        return Probe(change.old_path, frozenset(range(1, before.count("\n") + 2)), at_import=True)
    if change.kind == "deleted":
        return Probe(change.old_path, frozenset(range(1, before.count("\n") + 2)), at_import=True)
    lines: set[int] = set()
    module_wide = False
    for line, _ in change.removed:
        holder = _innermost(functions, line)
        if holder is not None and line < holder.body_start:
            lines.update(range(holder.body_start, holder.end + 1))
        else:
            lines.add(line)
    new_functions = _functions(after) or []
    added_lines = {ln for ln, _ in change.added}
    texts = dict(change.added)
    in_place = _in_place_of(change, before)
    imports = _top_level_imports(after) & added_lines
    for new_line, anchor in change.anchors:
        if new_line in imports:
            continue  # counted below, when nothing else of the file changes
        in_new = _innermost(new_functions, new_line)
        if in_new is not None and in_new.def_line in added_lines:
            continue  # a new function: reached only through changed code that calls it
        holder = _innermost(functions, anchor) if in_new is not None else None
        if holder is not None and anchor in in_place and anchor >= holder.body_start:
            continue  # reached only through the removed statement it replaces, counted above
        if holder is not None:
            lines.update(range(holder.body_start, holder.end + 1))
        elif _is_code(texts.get(new_line, "")):
            module_wide = True  # a top-level blank line or comment executes nothing
    added = added_lines - imports
    if imports and not (lines or module_wide or any(_is_code(texts.get(ln, "")) for ln in added)):
        module_wide, added = True, added_lines  # imports are all the patch adds here
    removed_top = {ln for ln, _ in change.removed if _innermost(functions, ln) is None}
    at_import = _runs_at_import(before, removed_top) or _runs_at_import(after, added)
    if module_wide:
        lines.update(range(1, before.count("\n") + 2))
    return Probe(change.old_path, frozenset(lines), module_wide=module_wide, at_import=at_import)


def probes_of(
    changes: list[FileChange],
    before: dict[str, str],
    after: dict[str, str],
    test_patterns: Sequence[str] = DEFAULT_PATTERNS,
) -> Probes:
    """The probes of a patch's changes; `before` and `after` hold the texts of its changed Python
    files on the starting tree (by old path) and with the patch (by new path); `test_patterns`:
    the repository's test module names (`test_modules.python_files`), files not measured."""
    found, unmeasured = [], []
    for change in changes:
        if change.binary or change.special or change.kind == "added":
            continue
        if not (change.old_path or "").endswith(".py"):
            if not _inert(change.path):
                unmeasured.append(change.path)
            continue
        assert change.old_path is not None
        if is_test_module(change.old_path, test_patterns):
            continue  # its tests are the task's anyway (edited, or run on the starting tree)
        if change.old_path in before:
            found.append(probe(change, before[change.old_path], after.get(change.path, "")))
    return Probes(probes=found, unmeasured=unmeasured)
