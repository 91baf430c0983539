"""Python outlines through the standard library's `ast` (exact, fast, no grammar needed)."""

import ast
import warnings

from tool_servers.search.index.chunks import (
    MAX_CHARS,
    MAX_LINES,
    Chunk,
    Definition,
    chunks_from_outline,
    with_leading_comments,
)

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def chunk_python(path: str, text: str) -> list[Chunk] | None:
    """Chunks of a Python file, or None when `ast` cannot parse it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in old code are not our concern
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    lines = text.splitlines()
    return chunks_from_outline(path, lines, _outlines(tree.body, lines, in_class=False, floor=1))


def _outlines(body: list[ast.stmt], lines: list[str], *, in_class: bool, floor: int) -> list[Definition]:
    """Definitions in a body; `floor` is the first line a leading comment may reach back to."""
    found = []
    for node in body:
        if isinstance(node, _DEFS):
            found.append(_outline(node, lines, in_class=in_class, floor=floor))
        floor = (node.end_lineno or node.lineno) + 1
    return found


def _defs(body: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    return [node for node in body if isinstance(node, _DEFS)]


def _outline(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
    lines: list[str],
    *,
    in_class: bool,
    floor: int,
) -> Definition:
    start = with_leading_comments(lines, _first_line(node), floor)
    end = node.end_lineno or node.lineno
    if isinstance(node, ast.ClassDef):
        first_body_line = node.body[0].lineno if node.body else node.lineno
        children = _outlines(node.body, lines, in_class=True, floor=first_body_line)
        kind = "class"
    else:
        children = []  # nested functions stay inside their function's chunk
        kind = "method" if in_class else "function"
    if isinstance(node, ast.ClassDef):
        # Only the class header and class-level code are cut here; methods are chunked on their own.
        boundaries = [_first_line(child) for child in node.body]
    elif end - start + 1 > MAX_LINES or sum(len(lines[n - 1]) + 1 for n in range(start, end + 1)) > MAX_CHARS:
        boundaries = sorted(
            {_first_line(s) for s in ast.walk(node) if isinstance(s, ast.stmt) and s is not node}
        )
    else:
        boundaries = []  # fits one chunk: walking its tree would be wasted (most definitions)
    return Definition(node.name, kind, start, end, _signature(node, lines), children, boundaries)


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, lines: list[str]) -> str:
    """The `def`/`class` line(s) up to the colon, joined: multi-line parameter lists included."""
    body_start = node.body[0].lineno if node.body else node.lineno
    parts = [lines[n - 1].strip() for n in range(node.lineno, max(node.lineno, body_start - 1) + 1)]
    signature = " ".join(p for p in parts if p)
    if node.body and node.body[0].lineno == node.lineno:  # `def f(): pass` on one line
        signature = lines[node.lineno - 1].strip()
    return signature[:300]
