"""Markdown and reStructuredText, one chunk per section, symbol = the heading path."""

import re

from tool_servers.search.index.chunks import Chunk, chunk_windows

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_MD_FENCE = re.compile(r"^\s*(```|~~~)")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+.:_])\1{2,}\s*$")


def chunk_markdown(path: str, text: str) -> list[Chunk]:
    lines = text.splitlines()
    headings: list[tuple[int, int, str]] = []  # (line, level, title)
    in_fence = False
    for n, line in enumerate(lines, start=1):
        if _MD_FENCE.match(line):
            in_fence = not in_fence  # a '#' inside a code block is a comment, not a heading
        elif not in_fence and (m := _MD_HEADING.match(line)):
            headings.append((n, len(m.group(1)), m.group(2).strip()))
    return _sections(path, lines, headings)


def chunk_rst(path: str, text: str) -> list[Chunk]:
    """Headings are a title line under (and optionally over) a punctuation line; the level of each
    underline character is the order in which it first appears, as docutils decides."""
    lines = text.splitlines()
    levels: dict[str, int] = {}
    headings: list[tuple[int, int, str]] = []
    for n in range(2, len(lines) + 1):
        title, under = lines[n - 2], lines[n - 1]
        m = _RST_UNDERLINE.match(under)
        if (
            not m
            or not title.strip()
            or _RST_UNDERLINE.match(title)
            or len(under.rstrip()) < len(title.rstrip())
        ):
            continue
        overlined = n >= 3 and lines[n - 3].strip() == under.strip()
        level = levels.setdefault(("o" if overlined else "") + m.group(1), len(levels) + 1)
        headings.append((n - 2 if overlined else n - 1, level, title.strip()))
    return _sections(path, lines, headings)


def _sections(path: str, lines: list[str], headings: list[tuple[int, int, str]]) -> list[Chunk]:
    chunks: list[Chunk] = []
    if not headings:
        return chunk_windows(path, lines, 1, len(lines), symbol=None, kind="text")
    if headings[0][0] > 1:
        chunks += chunk_windows(path, lines, 1, headings[0][0] - 1, symbol=None, kind="text")
    stack: list[tuple[int, str]] = []
    for i, (line, level, title) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = headings[i + 1][0] - 1 if i + 1 < len(headings) else len(lines)
        symbol = " > ".join(t for _, t in stack)
        chunks += chunk_windows(path, lines, line, end, symbol=symbol, kind="section")
    return chunks
