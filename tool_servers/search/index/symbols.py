"""Symbol look-ups over the chunk table: `find_symbol` and the ranked repository map.

References are found textually (whole-word matches in chunk text), not by resolving imports: it
works for every language the chunker handles, at the price of counting same-named symbols
together. The repo map ranks a symbol by how many *other* files mention its name, the cheap
cousin of a reference graph's in-degree; files rank by the sum over their symbols.
"""

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tool_servers.search.errors import InvalidQuery
from tool_servers.search.index.rows import DefinitionRow, OutlineRow, fetch
from tool_servers.search.index.tokens import TokenCounter, estimate_tokens
from tool_servers.search.models import RepoMap, RepoMapFile, RepoMapSymbol, SymbolLocation, SymbolResult

if TYPE_CHECKING:
    from lancedb.table import Table

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINITION_KINDS = ("function", "class", "method")


def find_symbol(table: "Table", name: str, *, limit: int = 100) -> SymbolResult:
    if not _NAME.fullmatch(name or ""):
        raise InvalidQuery(f"{name!r} is not an identifier: pass a name like `open_file` or `Client.send`")
    last = name.rsplit(".", 1)[-1]
    columns = ["path", "start_line", "end_line", "symbol", "kind", "signature", "text"]
    rows = fetch(table.search().where(f"name = '{last.lower()}'").select(columns).limit(None), DefinitionRow)
    definitions = _merge_pieces([r for r in rows if r["kind"] in _DEFINITION_KINDS])
    # Exact qualified name first, then exact case, then the rest (case-insensitive matches).
    definitions.sort(
        key=lambda d: (
            not (d.symbol or "").endswith(name),
            (d.symbol or "").rsplit(".", 1)[-1] != last,
            d.path,
            d.line,
        )
    )
    defining_lines = {(d.path, d.line) for d in definitions}
    word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(last)}(?![A-Za-z0-9_])")
    like = last.replace("'", "''")
    candidates = fetch(
        table.search().where(f"text LIKE '%{like}%'").select(columns).limit(None), DefinitionRow
    )
    references: dict[tuple[str, int], SymbolLocation] = {}
    for row in candidates:
        for offset, line in enumerate(row["text"].split("\n")):
            number = row["start_line"] + offset
            if word.search(line) and (row["path"], number) not in defining_lines:
                references.setdefault(
                    (row["path"], number),
                    SymbolLocation(
                        path=row["path"],
                        line=number,
                        end_line=number,
                        symbol=row["symbol"],
                        kind="reference",
                        text=line.strip()[:300],
                    ),
                )
    ordered = sorted(references.values(), key=lambda r: (r.path, r.line))
    return SymbolResult(
        name=name, definitions=definitions, references=ordered[:limit], truncated=len(ordered) > limit
    )


def _merge_pieces(rows: list[DefinitionRow]) -> list[SymbolLocation]:
    """One location per definition: a long definition is stored as overlapping pieces."""
    merged: list[SymbolLocation] = []
    rows = sorted(rows, key=lambda r: (r["path"], r["symbol"] or "", r["start_line"]))
    for row in rows:
        last = merged[-1] if merged else None
        if (
            last
            and last.path == row["path"]
            and last.symbol == row["symbol"]
            and row["start_line"] <= last.end_line + 1
        ):
            merged[-1] = last.model_copy(update={"end_line": max(last.end_line, row["end_line"])})
            continue
        merged.append(
            SymbolLocation(
                path=row["path"],
                line=_definition_line(row),
                end_line=row["end_line"],
                symbol=row["symbol"],
                kind=row["kind"],
                text=row["signature"] or "",
            )
        )
    return merged


def _definition_line(row: OutlineRow) -> int:
    """The line of the `def`/`class` itself, past decorators and leading comments."""
    head = (row["signature"] or "").split("(")[0].strip()
    for offset, line in enumerate(row["text"].split("\n")):
        if head and line.strip().startswith(head):
            return row["start_line"] + offset
    return row["start_line"]


@dataclass(frozen=True, slots=True)
class _Symbol:
    path: str
    name: str
    kind: str
    line: int
    signature: str
    references: int


Outline = dict[str, list[_Symbol]]
"""path -> its functions, classes and methods (`load_outline`), for `render_repo_map`."""


def load_outline(table: "Table") -> Outline:
    """Every file's functions, classes and methods with their reference counts."""
    columns = ["path", "symbol", "kind", "signature", "start_line", "text"]
    rows = fetch(table.search().select(columns).limit(None), OutlineRow)
    files_using: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        for word in set(_WORDS.findall(row["text"])):
            files_using[word].add(row["path"])
    seen: set[tuple[str, str]] = set()
    outline: dict[str, list[_Symbol]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: (r["path"], r["start_line"])):
        symbol = row["symbol"]
        if row["kind"] not in _DEFINITION_KINDS or not symbol or symbol.count(".") > 1:
            continue
        if (row["path"], symbol) in seen:  # later pieces of a split definition, or an overload
            continue
        seen.add((row["path"], symbol))
        short = symbol.rsplit(".", 1)[-1]
        refs = len(files_using.get(short, set()) - {row["path"]})
        outline[row["path"]].append(
            _Symbol(row["path"], symbol, row["kind"], _definition_line(row), row["signature"] or symbol, refs)
        )
    return dict(outline)


def render_repo_map(
    outline: Outline, token_budget: int, *, count_tokens: TokenCounter = estimate_tokens
) -> RepoMap:
    """Most referenced files first; a file that does not fit whole keeps its most referenced
    symbols; files that cannot fit even one symbol are left out."""
    ranked = sorted(outline.items(), key=lambda item: (-sum(s.references for s in item[1]), item[0]))
    used = 0
    truncated = False
    files: list[RepoMapFile] = []
    blocks: list[str] = []
    for path, symbols in ranked:
        by_refs = sorted(symbols, key=lambda s: (-s.references, s.line))
        for keep in range(len(by_refs), 0, -1):
            chosen = sorted(by_refs[:keep], key=lambda s: s.line)
            block = _render_file(path, chosen)
            cost = count_tokens(block + "\n")
            if used + cost <= token_budget:
                break
        else:
            truncated = True
            continue
        truncated |= keep < len(by_refs)
        used += cost
        blocks.append(block)
        files.append(
            RepoMapFile(
                path=path,
                score=sum(s.references for s in symbols),
                symbols=[
                    RepoMapSymbol(
                        name=s.name, kind=s.kind, line=s.line, signature=s.signature, references=s.references
                    )
                    for s in sorted(chosen, key=lambda s: (-s.references, s.line))
                ],
            )
        )
    text = "\n".join(blocks)
    return RepoMap(files=files, text=text, tokens=count_tokens(text), truncated=truncated)


def _render_file(path: str, symbols: list[_Symbol]) -> str:
    lines = [f"{path}:"]
    for s in symbols:
        indent = "    " if s.kind == "method" else "  "
        lines.append(f"{indent}{s.line}: {s.signature}")
    return "\n".join(lines)
