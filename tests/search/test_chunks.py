"""Chunking follows code structure."""

import textwrap
from pathlib import Path

import anyio
import pytest

from tool_servers.search.index.chunks import MAX_CHARS, MAX_LINES, OVERLAP_LINES, chunk_file

ANYIO_SRC = Path(anyio.__file__).parent


def test_python_definitions_become_chunks_with_decorators_docstrings_and_qualified_names() -> None:
    """Each function, class header and method is a chunk carrying its decorators and docstring."""
    source = textwrap.dedent(
        '''\
        """Module doc."""
        import os


        @register
        def top(a, b):
            """Add."""
            return a + b


        class Box(Base):
            """A box."""

            size = 3

            # Why this exists.
            @property
            def area(self) -> int:
                return self.size**2

            async def fill(self, item):
                await item
        '''
    )
    chunks = {(c.symbol, c.kind): c for c in chunk_file("pkg/box.py", source)}
    header = chunks[(None, "module")]
    assert header.start_line == 1 and "import os" in header.text and "Module doc" in header.text
    top = chunks[("top", "function")]
    assert top.text.startswith("@register\ndef top") and '"""Add."""' in top.text
    assert (top.start_line, top.end_line, top.signature) == (5, 8, "def top(a, b):")
    box = chunks[("Box", "class")]
    assert "size = 3" in box.text and "def area" not in box.text
    area = chunks[("Box.area", "method")]
    assert area.text.startswith("    # Why this exists.\n    @property") and area.end_line == 19
    assert chunks[("Box.fill", "method")].signature == "async def fill(self, item):"


def test_long_function_is_split_at_statement_boundaries_with_a_little_overlap() -> None:
    """A body longer than the size limit becomes pieces cut where statements start, overlapping."""
    # Multi-line statements: a cut inside one would land on an argument line.
    body = "".join(f"    value_{i} = compute(\n        {i},\n        flag=True,\n    )\n" for i in range(120))
    source = f"def long(total):\n{body}    return total\n"
    pieces = [c for c in chunk_file("long.py", source) if c.symbol == "long"]
    lines = source.splitlines()
    assert len(pieces) > 3
    assert pieces[0].start_line == 1 and pieces[-1].end_line == len(lines)
    for before, after in zip(pieces, pieces[1:], strict=False):
        assert 0 < before.end_line - after.start_line + 1 <= OVERLAP_LINES
        assert lines[before.end_line].lstrip().startswith(("value_", "return"))  # cut before a statement
    for piece in pieces:
        assert piece.end_line - piece.start_line + 1 <= MAX_LINES and len(piece.text) <= MAX_CHARS


def test_python_that_ast_cannot_parse_is_chunked_through_tree_sitter() -> None:
    """Python 2 syntax fails `ast`; tree-sitter's error recovery still finds the definitions."""
    source = 'import os\n\n\ndef old(x):\n    print "hi", x\n    return x\n\n\nclass K:\n    def m(self):\n        return 1\n'
    chunks = chunk_file("legacy.py", source)
    assert {(c.symbol, c.kind) for c in chunks} >= {("old", "function"), ("K.m", "method")}
    old = next(c for c in chunks if c.symbol == "old")
    assert (old.start_line, old.end_line) == (4, 6)


def test_markdown_is_chunked_by_heading_and_ignores_hashes_in_code_fences() -> None:
    """Sections carry their heading path as the symbol; a `#` comment in a fence is no heading."""
    text = "Intro line.\n\n# Guide\n\nSome text.\n\n## Install\n\n```sh\n# not a heading\npip install x\n```\n\n## Use\n\nRun it.\n"
    chunks = chunk_file("docs/guide.md", text)
    assert [(c.symbol, c.start_line) for c in chunks] == [
        (None, 1),
        ("Guide", 3),
        ("Guide > Install", 7),
        ("Guide > Use", 14),
    ]
    assert "pip install x" in chunks[2].text


SETEXT_MARKDOWN = """\
Project
=======

Intro text.

Install
-------

```python
# a comment, not a heading
import project
```

~~~
## still code
~~~

    # indented code, not a heading

Usage notes
across two lines
----------------

### Details ###

Text.
"""


def test_markdown_setext_headings_are_sections_and_hashes_in_code_are_not() -> None:
    """`Title` over `===`/`---` is a heading as much as `# Title`; `#` lines in backtick and tilde
    fences and in indented code are code."""
    chunks = chunk_file("README.md", SETEXT_MARKDOWN)
    assert [(c.symbol, c.start_line) for c in chunks] == [
        ("Project", 1),
        ("Project > Install", 6),
        ("Project > Usage notes across two lines", 20),
        ("Project > Usage notes across two lines > Details", 24),
    ]
    install = chunks[1].text
    assert "# a comment, not a heading" in install and "## still code" in install
    assert "# indented code, not a heading" in install
    assert chunks[-1].text.endswith("Text.")


def test_restructuredtext_sections_nest_by_the_order_underline_styles_appear() -> None:
    """docutils rule: the first underline style seen is level 1, the next level 2."""
    text = "Title\n=====\n\nIntro.\n\nPart A\n------\n\nA text.\n\nPart B\n------\n\nB text.\n"
    chunks = chunk_file("README.rst", text)
    assert [(c.symbol, c.kind) for c in chunks] == [
        ("Title", "section"),
        ("Title > Part A", "section"),
        ("Title > Part B", "section"),
    ]


def test_text_without_structure_is_windowed_at_blank_lines() -> None:
    """Windows stay within the limits and end where a paragraph ends."""
    paragraphs = ["\n".join(f"line {p}.{i}" for i in range(7)) for p in range(40)]
    text = "\n\n".join(paragraphs) + "\n"
    chunks = chunk_file("notes.txt", text)
    lines = text.splitlines()
    assert len(chunks) > 1
    for chunk in chunks[:-1]:
        assert chunk.end_line - chunk.start_line + 1 <= MAX_LINES
        assert lines[chunk.end_line] == ""  # the line after a window is a paragraph break


@pytest.mark.parametrize("path", sorted(p.relative_to(ANYIO_SRC).as_posix() for p in ANYIO_SRC.rglob("*.py")))
def test_chunks_of_real_library_files_cover_every_line_with_exact_text(path: str) -> None:
    """On code nobody here wrote, every non-blank line lands in a chunk whose text is the file's lines."""
    text = (ANYIO_SRC / path).read_text()
    lines = text.splitlines()
    covered: set[int] = set()
    for chunk in chunk_file(path, text):
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    missing = [n for n, line in enumerate(lines, start=1) if line.strip() and n not in covered]
    assert missing == [], f"{path}: lines {missing[:10]} are in no chunk"


def test_empty_and_blank_files_yield_no_chunks(tmp_path: Path) -> None:
    """Nothing to search, nothing to embed."""
    assert chunk_file("empty.py", "") == []
    assert chunk_file("blank.md", "\n\n   \n") == []
