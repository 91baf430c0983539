"""No import cycle spans two folders: modules that import each other, directly or around a
circle, live in one package.

Run by `make lint` (and the pre-commit hook). The graph has one node per module of the shipped
packages and an edge for every import of one of them anywhere in a file: at module level, inside
a function (a lazy import is still a dependency, only a later one) and under `TYPE_CHECKING`.
`from a.b import c` is an edge to `a.b.c` when that is a module, else to `a.b`. A cycle inside
one folder (two modules of a package that need each other) is that package's business; a cycle
through two folders means neither package can be understood, tested or moved without the other,
so it is reported: one line per tangle (its strongly connected component), naming its folders
and a shortest circle through it. Exits 1 if there is any.

Importing a module also runs its parent packages' `__init__`; those implicit edges are left out,
because every module would otherwise sit on a circle with its own package.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("codeloop", "bus", "agents", "tool_servers", "sandbox", "redaction", "layout")
SKIP_DIRS = {"node_modules", "__pycache__"}


@dataclass(frozen=True)
class Tangle:
    """Modules of several folders on one import cycle."""

    folders: tuple[str, ...]
    circle: tuple[str, ...]
    """A shortest circle through the tangle that leaves its first module's folder, first module repeated last."""

    def __str__(self) -> str:
        return f"import cycle across {', '.join(self.folders)}: {' -> '.join(self.circle)}"


def modules(root: Path, packages: tuple[str, ...] = SHIPPED) -> dict[str, Path]:
    """Every module of `packages` under `root` by dotted name (a package by its `__init__`)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if SKIP_DIRS.intersection(path.relative_to(root).parts):
                continue
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def folder(name: str, known: dict[str, Path]) -> str:
    """The package a module belongs to (a package's `__init__` belongs to the package itself)."""
    return name if known[name].name == "__init__.py" else name.rpartition(".")[0]


def _imported(node: ast.AST, package: str) -> Iterator[str]:
    """The dotted names an import statement names (relative ones resolved against `package`)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parent = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parent, *([node.module] if node.module else [])])
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def edges(known: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other known modules."""
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = folder(name, known)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            for target in _imported(node, package):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of `graph` (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _circle(
    graph: dict[str, set[str]], members: set[str], start: str, known: dict[str, Path]
) -> tuple[str, ...]:
    """A shortest circle from `start` back to it inside `members` that leaves `start`'s folder."""
    home = folder(start, known)
    # Breadth-first over (module, left home yet); the circle must go out and come back.
    queue: deque[tuple[str, bool, tuple[str, ...]]] = deque([(start, False, (start,))])
    seen = {(start, False)}
    while queue:
        node, left, path = queue.popleft()
        for child in sorted(graph[node] & members):
            gone = left or folder(child, known) != home
            if child == start and gone:
                return (*path, start)
            if (child, gone) not in seen:
                seen.add((child, gone))
                queue.append((child, gone, (*path, child)))
    return (start,)


def tangles(root: Path, packages: tuple[str, ...] = SHIPPED) -> list[Tangle]:
    """The import cycles of `packages` under `root` that span more than one folder."""
    known = modules(root, packages)
    graph = edges(known)
    found = []
    for component in components(graph):
        folders = sorted({folder(name, known) for name in component})
        if len(folders) > 1:
            members = set(component)
            found.append(Tangle(tuple(folders), _circle(graph, members, component[0], known)))
    return found


def main() -> int:
    found = tangles(ROOT)
    for tangle in found:
        print(tangle)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
