"""How many annotations say `Any`: a ceiling that keeps the types from stopping at the seams.

Run by `make lint` with `--max N` (and the pre-commit hook). Counted over every Python file of the
repository (virtualenvs and caches aside), one per annotation that mentions `Any` anywhere inside
it — `Any`, `typing.Any`, `t.Any`, `dict[str, Any]`, or the same in a quoted annotation:

- a function's parameters (`*args` and `**kwargs` included) and its return;
- an annotated assignment (`x: Any = ...`), which is also how class fields are declared.

Prints the total and the count per top-level folder; with `--max N`, exits 1 when the total is
over N. When you replace an `Any` with a real type, lower the ceiling in the Makefile to the new
total, so the count only goes down.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Not ours or not Python we maintain: virtualenvs, caches, installed node packages.
SKIP_DIRS = {".venv", "node_modules", "__pycache__", ".codeloop", "build", "dist", ".git"}


def mentions_any(annotation: ast.expr) -> bool:
    """True when `Any` appears in the annotation, bare, as an attribute, or in a quoted part (the
    strings of a `Literal[...]` are values, not types)."""
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "Any"
    if isinstance(annotation, ast.Subscript) and _name(annotation.value) == "Literal":
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            return mentions_any(ast.parse(annotation.value, mode="eval").body)
        except SyntaxError:
            return False
    return any(
        mentions_any(child) for child in ast.iter_child_nodes(annotation) if isinstance(child, ast.expr)
    )


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _annotations(tree: ast.AST) -> Iterator[ast.expr]:
    """Every annotation of the module: parameters, returns, annotated assignments."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            yield from (a.annotation for a in every if a is not None and a.annotation is not None)
            if not isinstance(node, ast.Lambda) and node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def count_file(path: Path) -> int:
    """Annotations in `path` that mention `Any`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return sum(1 for annotation in _annotations(tree) if mentions_any(annotation))


def python_files(root: Path) -> Iterator[Path]:
    """The repository's Python files, in a stable order."""
    for path in sorted(root.rglob("*.py")):
        if not SKIP_DIRS.intersection(path.relative_to(root).parts):
            yield path


def count_tree(root: Path) -> Counter[str]:
    """Annotations mentioning `Any`, per top-level folder (`.` for files at the root)."""
    counts: Counter[str] = Counter()
    for path in python_files(root):
        parts = path.relative_to(root).parts
        counts[parts[0] if len(parts) > 1 else "."] += count_file(path)
    return counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Count the annotations that mention Any.")
    parser.add_argument("--max", type=int, default=None, help="exit 1 when the total is over this")
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to count (default: this one)")
    options = parser.parse_args(argv)
    counts = count_tree(options.root)
    total = sum(counts.values())
    for folder, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if count:
            print(f"{count:6d}  {folder}")
    print(f"{total:6d}  total")
    if options.max is not None and total > options.max:
        print(
            f"{total} annotations mention Any, over the ceiling of {options.max}: give the new ones "
            "a real type (a model, a Protocol, JsonValue, object inside a function)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
