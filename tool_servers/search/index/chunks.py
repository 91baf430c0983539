"""Chunks: the unit the index embeds, searches and returns.

Chunks follow code structure so a hit is a whole function, class header or document section, not
an arbitrary window: Python through `ast` (`pychunks`), other languages through tree-sitter when
a grammar wheel is installed (`tschunks`; also Python files `ast` cannot parse), Markdown and
reStructuredText by heading (`docchunks`), anything else in windows that end at blank lines.

A parser produces an outline (`Definition` tree); `chunks_from_outline` turns it into chunks: a
module header (imports, docstring) before the first definition, each function, class header and
method with its decorators, module- or class-level code between definitions, and long spans split
at statement boundaries with `OVERLAP_LINES` of overlap. `MAX_LINES` and `MAX_CHARS` keep a hit
one answer (a function, not a file). The bundled embedding model reads only a chunk's first
`embed.BUNDLED_MAX_TOKENS` (128) tokens, where a definition's signature and docstring sit; the
keyword leg reads the whole chunk.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from tool_servers.search.models import ChunkKind

MAX_LINES = 80
MAX_CHARS = 3000
OVERLAP_LINES = 2


@dataclass(frozen=True, slots=True)
class Chunk:
    """One indexed piece of a file."""

    path: str
    start_line: int
    """1-based, inclusive."""
    end_line: int
    """1-based, inclusive."""
    symbol: str | None
    """Qualified name (`Class.method`) or heading path (`Install > From source`)."""
    kind: ChunkKind
    text: str
    signature: str | None = None
    """The definition line(s) of a function or class, for the repo map."""

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def name(self) -> str | None:
        """Last component of the symbol: what a query naming the identifier matches."""
        if self.symbol is None or self.kind in ("section", "text", "module"):
            return None
        return self.symbol.rsplit(".", 1)[-1]


@dataclass(slots=True)
class Definition:
    """A function or class found by a parser, lines 1-based inclusive (decorators included)."""

    name: str
    kind: ChunkKind
    start: int
    end: int
    signature: str
    children: list["Definition"] = field(default_factory=list)
    boundaries: list[int] = field(default_factory=list)
    """Lines where a statement starts: preferred cut points when the span is too long."""


_COMMENT_PREFIXES = ("#", "//", "/*", "*", "--", ";")


def with_leading_comments(lines: Sequence[str], start: int, floor: int) -> int:
    """Move a definition's first line up over the comment lines right above it (no blank line
    between), down to `floor`: such comments describe the definition and belong in its chunk."""
    while start - 1 >= max(floor, 1) and lines[start - 2].lstrip().startswith(_COMMENT_PREFIXES):
        start -= 1
    return start


def chunk_file(path: str, text: str) -> list[Chunk]:
    """Chunk one file's text by the structure its suffix suggests."""
    from tool_servers.search.index import docchunks, pychunks, tschunks

    if not text.strip():
        return []
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in (".py", ".pyi"):
        chunks = pychunks.chunk_python(path, text)
        if chunks is None:  # a syntax error for ast: tree-sitter recovers from errors
            chunks = tschunks.chunk_tree_sitter(path, text, "python")
        if chunks is not None:
            return chunks
    elif suffix in (".md", ".markdown"):
        return docchunks.chunk_markdown(path, text)
    elif suffix in (".rst", ".rest"):
        return docchunks.chunk_rst(path, text)
    elif (lang := tschunks.language_for(suffix)) is not None:
        chunks = tschunks.chunk_tree_sitter(path, text, lang)
        if chunks is not None:
            return chunks
    return chunk_windows(path, text.splitlines(), 1, len(text.splitlines()), symbol=None, kind="text")


def chunks_from_outline(path: str, lines: Sequence[str], outline: list[Definition]) -> list[Chunk]:
    """Turn a file's top-level definitions into chunks, covering the code between them too."""
    chunks: list[Chunk] = []
    _gaps(chunks, path, lines, 1, len(lines), outline, symbol=None, kind="module")
    for definition in outline:
        _definition(chunks, path, lines, definition, prefix="")
    chunks.sort(key=lambda c: (c.start_line, c.end_line))
    return chunks


def _definition(chunks: list[Chunk], path: str, lines: Sequence[str], d: Definition, prefix: str) -> None:
    symbol = prefix + d.name
    if not d.children:
        for start, end in split_range(lines, d.start, d.end, d.boundaries):
            chunks.append(_chunk(path, lines, start, end, symbol, d.kind, d.signature))
        return
    # A class with methods: its header and class-level code are chunks, each method its own.
    first = min(child.start for child in d.children)
    for start, end in split_range(lines, d.start, first - 1, d.boundaries):
        if _has_text(lines, start, end):
            chunks.append(_chunk(path, lines, start, end, symbol, d.kind, d.signature))
    _gaps(chunks, path, lines, first, d.end, d.children, symbol=symbol, kind=d.kind)
    for child in d.children:
        _definition(chunks, path, lines, child, prefix=symbol + ".")


def _gaps(
    chunks: list[Chunk],
    path: str,
    lines: Sequence[str],
    start: int,
    end: int,
    defs: list[Definition],
    *,
    symbol: str | None,
    kind: ChunkKind,
) -> None:
    """Chunk the lines in [start, end] that no definition covers."""
    cursor = start
    for d in sorted(defs, key=lambda d: d.start):
        if d.start > cursor:
            chunks.extend(chunk_windows(path, lines, cursor, d.start - 1, symbol=symbol, kind=kind))
        cursor = max(cursor, d.end + 1)
    if cursor <= end:
        chunks.extend(chunk_windows(path, lines, cursor, end, symbol=symbol, kind=kind))


def chunk_windows(
    path: str, lines: Sequence[str], start: int, end: int, *, symbol: str | None, kind: ChunkKind
) -> list[Chunk]:
    """Chunk [start, end] in windows that prefer to end at blank lines; blank-only spans yield none."""
    boundaries = [n + 1 for n in range(start, end) if not lines[n - 1].strip()]
    return [
        _chunk(path, lines, s, e, symbol, kind, None)
        for s, e in split_range(lines, start, end, boundaries)
        if _has_text(lines, s, e)
    ]


def split_range(
    lines: Sequence[str], start: int, end: int, boundaries: Sequence[int]
) -> list[tuple[int, int]]:
    """Cut [start, end] into pieces within `MAX_LINES`/`MAX_CHARS`, at the furthest boundary that
    fits (a line where a statement or paragraph starts), else hard at the limit; consecutive
    pieces overlap by `OVERLAP_LINES`."""
    if end < start:
        return []
    cuts = sorted(b for b in set(boundaries) if start < b <= end)
    pieces: list[tuple[int, int]] = []
    piece_start = start
    while True:
        limit = _fit_end(lines, piece_start, end)
        if limit >= end:
            pieces.append((piece_start, end))
            return pieces
        candidates = [b for b in cuts if piece_start + OVERLAP_LINES < b <= limit + 1]
        cut = candidates[-1] if candidates else limit + 1
        pieces.append((piece_start, cut - 1))
        piece_start = max(cut - OVERLAP_LINES, piece_start + 1)
        # Overlap must not start on blank lines only to repeat them.
        while piece_start < cut and not lines[piece_start - 1].strip():
            piece_start += 1


def _fit_end(lines: Sequence[str], start: int, end: int) -> int:
    """Last line such that [start, that] stays within the size limits (at least `start`)."""
    chars = 0
    last = min(end, start + MAX_LINES - 1)
    for n in range(start, last + 1):
        chars += len(lines[n - 1]) + 1
        if chars > MAX_CHARS and n > start:
            return n - 1
    return last


def _has_text(lines: Sequence[str], start: int, end: int) -> bool:
    return any(lines[n - 1].strip() for n in range(start, end + 1))


def _chunk(
    path: str,
    lines: Sequence[str],
    start: int,
    end: int,
    symbol: str | None,
    kind: ChunkKind,
    sig: str | None,
) -> Chunk:
    # Trim blank edges so line ranges point at code, not whitespace.
    while start < end and not lines[start - 1].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return Chunk(path, start, end, symbol, kind, "\n".join(lines[start - 1 : end]), sig)
