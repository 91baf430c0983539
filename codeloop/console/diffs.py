"""A task's patch as the console shows it: one section per file, highlighted by Pygments.

The highlighting is done here, on the server, into class names (`.hl .gi` an added line, `.hl .gd`
a removed one); the stylesheet is Pygments' own, served at `/static/pygments.css`. Nothing runs
in the browser and no style attribute is written, so the Content-Security-Policy needs no
`unsafe-inline`.
"""

import re
from dataclasses import dataclass
from functools import cache

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer

CSS_CLASS = "hl"
_FILE_HEADER = re.compile(r"^diff --git a/(?P<a>.+?) b/(?P<b>.+)$")


@dataclass(frozen=True)
class FileDiff:
    path: str
    added: int
    removed: int
    html: Markup
    """The file's part of the patch, highlighted."""


def split_patch(patch: str) -> list[FileDiff]:
    """`patch` (a unified diff with `diff --git` headers, or plain `---`/`+++` ones) per file."""
    parts: list[tuple[str, list[str]]] = []
    for line in patch.splitlines(keepends=True):
        header = _FILE_HEADER.match(line.rstrip("\n"))
        starts_plain = line.startswith("--- ") and (not parts or _has_hunk(parts[-1][1]))
        if header or starts_plain or not parts:
            path = header.group("b") if header else _plain_path(line)
            parts.append((path, [line]))
        else:
            if parts[-1][0] == "" and line.startswith("+++ "):
                parts[-1] = (_plain_path(line), parts[-1][1])
            parts[-1][1].append(line)
    return [_file(path or "(patch)", "".join(lines)) for path, lines in parts if "".join(lines).strip()]


def _has_hunk(lines: list[str]) -> bool:
    return any(line.startswith("@@") for line in lines)


def _plain_path(line: str) -> str:
    if not line.startswith(("--- ", "+++ ")):
        return ""
    name = line[4:].split("\t", 1)[0].strip()
    return "" if name == "/dev/null" else name.removeprefix("a/").removeprefix("b/")


def _file(path: str, text: str) -> FileDiff:
    body = [line for line in text.splitlines() if not line.startswith(("+++", "---"))]
    added = sum(1 for line in body if line.startswith("+"))
    removed = sum(1 for line in body if line.startswith("-"))
    # Markup: Pygments escapes every character of the text it highlights.
    html = Markup(highlight(text, DiffLexer(), HtmlFormatter(cssclass=CSS_CLASS)))
    return FileDiff(path=path, added=added, removed=removed, html=html)


@cache
def pygments_css() -> str:
    """The stylesheet of the highlighted diffs."""
    return HtmlFormatter(cssclass=CSS_CLASS).get_style_defs(f".{CSS_CLASS}")
