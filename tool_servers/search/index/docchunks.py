"""Markdown and reStructuredText, one chunk per section, symbol = the heading path."""

import re
import threading

from markdown_it import MarkdownIt

from tool_servers.search.index.chunks import Chunk, chunk_windows

_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+.:_])\1{2,}\s*$")
_markdown = threading.local()  # a parser per thread: the indexer chunks files in worker threads


def chunk_markdown(path: str, text: str) -> list[Chunk]:
    """Sections by CommonMark's headings, as markdown-it parses them: ATX (`# Title`) and setext
    (`Title` underlined with `===` or `---`); a `#` line in a code block or fence is code. Headings
    nested in a list or quote stay inside their section."""
    lines = text.splitlines()
    # Joined with "\n" so markdown-it's line numbers are indexes into `lines` (splitlines also
    # breaks at form feeds and the like, which markdown-it leaves inside a line).
    tokens = _parser().parse("\n".join(lines))
    headings: list[tuple[int, int, str]] = []  # (line, level, title)
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map is not None:
            title = " ".join(tokens[i + 1].content.split())
            if title:  # a bare `#` is a heading to CommonMark, but names nothing
                headings.append((token.map[0] + 1, int(token.tag[1:]), title))
    return _sections(path, lines, headings)


def _parser() -> MarkdownIt:
    parser = getattr(_markdown, "parser", None)
    if parser is None:
        # Block structure is all a section needs: inline parsing (links, emphasis) is skipped.
        parser = _markdown.parser = MarkdownIt("commonmark").disable("inline")
    return parser


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
