"""Outlines through tree-sitter, for any language whose grammar wheel is installed.

Grammars must be installed per language (`tree-sitter-python`, `tree-sitter-javascript`, ...):
tree-sitter-language-pack ships none and downloads at runtime, which an offline indexer must not
do. Definition nodes are recognised by their type names, which the grammars share by convention
(`function_definition`, `class_declaration`, `method_definition`, `impl_item`, ...), so one walker
serves them all; containers (classes, impls, interfaces, namespaces) are walked for methods.
"""

import importlib
import re
from functools import cache
from typing import TYPE_CHECKING

from tool_servers.search.index.chunks import Chunk, Definition, chunks_from_outline, with_leading_comments

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

_LANGUAGES = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cs": "c_sharp",
    ".rb": "ruby",
    ".php": "php",
    ".kt": "kotlin",
    ".scala": "scala",
    ".swift": "swift",
    ".lua": "lua",
}
# (wheel module, function returning the language pointer)
_GRAMMARS = {
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "php": ("tree_sitter_php", "language_php"),
}
_DEFINITION = re.compile(
    r"^(function|method|class|struct|impl|interface|trait|enum|module|namespace|constructor|type)_"
    r"(definition|declaration|item|specifier)$|^(function|method|arrow_function|generator_function)$"
)
_CONTAINER = re.compile(r"^(class|struct|impl|interface|trait|module|namespace|enum)_")


def language_for(suffix: str) -> str | None:
    """The grammar name for a file suffix, when that grammar is installed."""
    lang = _LANGUAGES.get(suffix)
    return lang if lang is not None and _parser(lang) is not None else None


@cache
def _parser(lang: str) -> "Parser | None":
    try:
        import tree_sitter

        module_name, func = _GRAMMARS.get(lang, (f"tree_sitter_{lang}", "language"))
        module = importlib.import_module(module_name)
        return tree_sitter.Parser(tree_sitter.Language(getattr(module, func)()))
    except (ImportError, AttributeError, ValueError):
        return None


def chunk_tree_sitter(path: str, text: str, lang: str) -> list[Chunk] | None:
    """Chunks of a file through its grammar, or None when the grammar is not installed."""
    parser = _parser(lang)
    if parser is None:
        return None
    tree = parser.parse(text.encode("utf-8"))
    lines = text.splitlines()
    return chunks_from_outline(path, lines, _outline(tree.root_node, lines, in_class=False))


def _outline(node: "Node", lines: list[str], *, in_class: bool) -> list[Definition]:
    found: list[Definition] = []
    floor = node.start_point.row + 2 if node.parent is not None else 1
    for child in node.named_children:
        child_floor = floor
        if "comment" not in child.type:  # comments above a definition attach to it
            floor = child.end_point.row + 2
        target = child
        if child.type == "decorated_definition":  # python: decorators belong to the definition
            target = child.child_by_field_name("definition") or child
        if not _DEFINITION.match(target.type):
            if child.type in ("export_statement", "declaration_list", "class_body", "block", "body"):
                found += _outline(child, lines, in_class=in_class)
            continue
        name = _name(target, lines)
        if name is None:
            continue
        container = bool(_CONTAINER.match(target.type))
        kind = "class" if container else ("method" if in_class else "function")
        children = []
        if container:
            body = target.child_by_field_name("body") or target
            children = _outline(body, lines, in_class=True)
        start = with_leading_comments(lines, child.start_point.row + 1, child_floor)
        end = child.end_point.row + 1
        boundaries = sorted({n.start_point.row + 1 for n in _descendants(target, depth=3)})
        signature = (
            lines[target.start_point.row].strip()[:300] if target.start_point.row < len(lines) else name
        )
        found.append(Definition(name, kind, start, end, signature, children, boundaries))
    return found


def _name(node: "Node", lines: list[str]) -> str | None:
    for field in ("name", "type", "declarator"):
        named = node.child_by_field_name(field)
        while named is not None and named.child_by_field_name("declarator") is not None:
            named = named.child_by_field_name("declarator")  # C: int *f(void) nests declarators
        if named is not None and named.text:
            return named.text.decode("utf-8", "replace").split("(")[0].strip() or None
    return None


def _descendants(node: "Node", *, depth: int) -> "list[Node]":
    if depth == 0:
        return []
    out = []
    for child in node.named_children:
        out.append(child)
        out += _descendants(child, depth=depth - 1)
    return out
