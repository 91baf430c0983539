"""Take an issue-shaped query apart: title, prose, code blocks, traceback frames, error lines,
file paths, dotted module paths and code identifiers.

A bug report is long (often 500+ words, the embedding model reads 128 tokens), narrative, and
names the broken code only sometimes and in scattered places: a path in a traceback, a
`Class.method` in backticks, a function called in a doctest. Each part suits a different
retrieval: paths and frames an exact file look-up, identifiers a definition look-up, prose and
the title the vector model, everything the keyword index. `decompose` finds the parts; it is
pure text work (no repository access), linear in the text, and bounded in what it returns, so
even a huge paste stays cheap.
"""

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tool_servers.search.index.query import STOP_WORDS

MAX_QUERY_CHARS = 200_000
"""Longer text is cut here before parsing: a paste that long is a log, and its tail adds nothing."""
PROSE_PIECES = 2
"""Prose pieces at most (the opening with the title, then the next window), before the error lines'
piece and the first code block's."""
MAX_PIECES = 2
"""Embedding pieces per query: the first of that order. Encoding is most of a long query's time
(about 40 ms a piece on 2 cores). On the tune half of the localization set (64 cases, each searched
in the nearest indexed checkout), file Acc@1 / MRR / R@10 were 0.703 / 0.797 / 0.875 with one
piece and 0.719 / 0.805 / 0.875 with 2, 3, 4 or 6; on the report half, 0.581 / 0.696 / 0.803 with
2 to 6. Most issues make two or three pieces; a long one made four."""
PIECE_WORDS = 90
"""Words per embedding piece: about 128 word-piece tokens, the model's cap."""
MAX_IDENTIFIERS = 200
MAX_KEYWORD_TERMS = 128
"""Full-text terms per query: the keyword leg's time grows with the terms (0.7 s for the 940 of
a 3,000-word issue on 2 busy cores, 0.1-0.2 s for 128), and past the title, the names and the
words the writer repeats, an issue's vocabulary is narrative."""

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_PROMPT_LINE = re.compile(r"^[ \t]*(?:>>>|\.\.\.|In \[\d+\]:|\$ )[ \t]?(.*)$", re.M)
_INDENTED = re.compile(r"(?:^(?: {4}|\t)[^\n]*\n?)+", re.M)
_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)(?:, in ([A-Za-z_<][\w<>.]*))?')
_ERROR_LINE = re.compile(
    r"^[ \t]*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt))(?::[ \t]*(.*))?$",
    re.M,
)
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyi|pyx|js|ts|tsx|jsx|go|rs|java|c|h|cc|cpp|hpp|rb|md|rst|toml|cfg|ini|yaml|yml|json))\b"
)
_DOTTED = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w(]*\.py\b)")
_IMPORT = re.compile(
    r"^[ \t]*(?:>>>[ \t]*)?(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+([\w, \t*()]+)|import[ \t]+([\w., \t]+))",
    re.M,
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_URL = re.compile(r"https?://\S+")
_PATH_SEPARATOR = re.compile(r"[/\\]")
_BANNER = re.compile(
    # Python 3.6.0 |Anaconda| (default, Dec 23 2016, 12:22:00): a version, then a build date and time
    r"^[ \t]*(?:Python [23]\.\d+\.\d+\S*[ \t].*\(.*\d{4},? +\d{1,2}:\d{2}.*\).*"
    r"|\[(?:GCC|Clang|MSC|PyPy) [^\]\n]*\](?: on \w+)?"  # [GCC 7.3.0] on linux
    r"|Type [\"'](?:help|copyright)[\"'].*"  # Type "help", "copyright", "credits" or "license" ...
    r"|IPython \d[\w.]* -- An enhanced Interactive Python.*"
    r"|(?:\?|%quickref|help|object\?)[ \t]+-> .*"  # IPython's help lines
    r")[ \t]*$",
    re.M,
)
"""The start-up lines of an interactive interpreter pasted with a session: they name the
interpreter, the distribution and the date, never the code the issue is about."""
_KEYWORDS = frozenset(
    """False None True and as assert async await break class continue def del elif else except
    finally for from global if import in is lambda nonlocal not or pass raise return try while
    with yield print self cls""".split()
)


@dataclass(frozen=True, slots=True)
class Frame:
    path: str
    """As written in the traceback (absolute, site-packages, or relative)."""
    line: int
    function: str | None
    depth: int
    """0 for the innermost frame (the last printed), 1 for its caller, ..."""


@dataclass(slots=True)
class IssueQuery:
    text: str
    title: str
    """The first non-empty line: in an issue, its title; in a short query, the query."""
    prose: str
    """The text outside code blocks, tracebacks and URLs."""
    code: list[str] = field(default_factory=list)
    """Fenced blocks, doctest/prompt lines and indented blocks, in order."""
    frames: list[Frame] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """`ValueError: message` lines, type and message."""
    paths: list[str] = field(default_factory=list)
    """File paths and bare file names mentioned anywhere (`sympy/core/basic.py`, `latex.py`)."""
    modules: list[str] = field(default_factory=list)
    """Dotted names that may be modules or qualified symbols (`sympy.printing.latex`, `Point.distance`)."""
    identifiers: dict[str, float] = field(default_factory=dict)
    """Code identifiers (as written) -> weight: title and backticks count most, prose next, code least."""
    pieces: list[str] = field(default_factory=list)
    """Texts for the embedding model, each about one model window, most telling first."""


# Where a name is mentioned says how much the writer means it: the title and backticks are
# deliberate, a name inside a pasted session may be incidental (`print`, `symbols`).
TITLE_WEIGHT = 3.0
BACKTICK_WEIGHT = 2.0
PROSE_WEIGHT = 1.0
CODE_WEIGHT = 0.5
FRAME_WEIGHT = 1.0


def decompose(query: str) -> IssueQuery:
    """The parts of `query` (see the module docstring). Never raises; empty text gives empty parts."""
    text = query[:MAX_QUERY_CHARS].replace("\r\n", "\n").replace("\r", "\n")
    text = _BANNER.sub("", text)
    title = next((line.strip() for line in text.split("\n") if line.strip()), "")
    code: list[str] = []
    spans: list[tuple[int, int]] = []
    for m in _FENCE.finditer(text):
        code.append(m.group(2))
        spans.append(m.span())
    rest = _blank(text, spans)
    prompt = [m.group(1) for m in _PROMPT_LINE.finditer(rest)]
    if prompt:
        code.append("\n".join(prompt))
    rest = _PROMPT_LINE.sub("", rest)
    for m in _INDENTED.finditer(rest):
        if m.start() > 0 or title not in m.group(0):
            code.append(m.group(0))
    rest = _INDENTED.sub("\n", rest)
    frames = _frames(text)
    errors = _errors(text)
    prose = _URL.sub(" ", _FRAME.sub(" ", rest))
    paths = _unique(m.group(1) for m in _PATH.finditer(_URL.sub(" ", text)))
    modules = _unique(_modules(text, paths))
    identifiers = _identifiers(title, prose, code, frames, text)
    parsed = IssueQuery(
        text=text,
        title=title,
        prose=prose,
        code=code,
        frames=frames,
        errors=errors,
        paths=paths,
        modules=modules,
        identifiers=identifiers,
    )
    parsed.pieces = _pieces(parsed)
    return parsed


def keyword_terms(issue: IssueQuery, *, limit: int = MAX_KEYWORD_TERMS) -> str:
    """The full-text query for an issue: the title's words, then the parts of its identifiers
    (heaviest first), then its other words by how often it uses them; at most `limit`."""
    from tool_servers.search.index.query import split_identifier

    counts: dict[str, int] = {}
    for w in words(issue.text):
        counts[w] = counts.get(w, 0) + 1
    ordered = words(issue.title)
    for ident in issue.identifiers:
        ordered += [p for p in split_identifier(ident.replace(".", "_")) if len(p) > 1]
        if not code_shaped(ident):
            ordered.append(ident.lower())
    ordered += sorted(counts, key=lambda w: -counts[w])
    return " ".join(list(dict.fromkeys(w for w in ordered if w not in STOP_WORDS))[:limit])


def words(text: str) -> list[str]:
    """Lower-cased words of `text` that are not stop words."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOP_WORDS]


def code_shaped(name: str) -> bool:
    """Written like code: `_`, a dot, or inner capitals."""
    return "_" in name or "." in name or bool(_CAMEL.search(name))


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with `spans` replaced by newlines, so line anchors still work around them."""
    out, last = [], 0
    for start, end in spans:
        out.append(text[last:start])
        out.append("\n")
        last = end
    out.append(text[last:])
    return "".join(out)


def _frames(text: str) -> list[Frame]:
    found = [(m.group(1), int(m.group(2)), m.group(3)) for m in _FRAME.finditer(text)]
    # Python prints the innermost frame last; several tracebacks in one issue are each read that
    # way, but a flat reversal is close enough and keeps the last traceback's bottom first.
    return [Frame(p, line, fn, depth) for depth, (p, line, fn) in enumerate(reversed(found))][:100]


def _errors(text: str) -> list[str]:
    out = []
    for m in _ERROR_LINE.finditer(text):
        message = (m.group(2) or "").strip()
        out.append(f"{m.group(1)}: {message}"[:300] if message else m.group(1))
    return _unique(out)[:20]


def _modules(text: str, paths: list[str]) -> Iterator[str]:
    for m in _IMPORT.finditer(text):
        if m.group(1):
            yield m.group(1)
            for name in re.split(r"[\s,()]+", m.group(2)):
                if name and name != "*":
                    yield f"{m.group(1)}.{name}"
        else:
            for name in re.split(r"[\s,]+", m.group(3)):
                if name and "." in name:
                    yield name
    for m in _DOTTED.finditer(text):
        name = m.group(1)
        if any(name in p for p in paths):
            continue
        parts = name.split(".")
        if all(len(p) > 1 or p.isupper() for p in parts) and not parts[-1].isdigit():
            yield name


def _identifiers(title: str, prose: str, code: list[str], frames: list[Frame], text: str) -> dict[str, float]:
    weights: dict[str, float] = {}

    def add(name: str, weight: float, *, require_shape: bool) -> None:
        name = name.strip(".")
        if len(name) < 2 or name in _KEYWORDS or name.lower() in STOP_WORDS or name.isdigit():
            return
        if require_shape and not code_shaped(name):
            return
        weights[name] = weights.get(name, 0.0) + weight

    for m in _BACKTICK.finditer(text):
        for ident in re.findall(r"[A-Za-z_][\w.]*", m.group(1)):
            add(ident, BACKTICK_WEIGHT, require_shape=False)
    for m in re.finditer(r"[A-Za-z_][\w.]*\(?", title):
        token = m.group(0)
        add(token.rstrip("("), TITLE_WEIGHT, require_shape=not token.endswith("("))
    for m in re.finditer(r"[A-Za-z_][\w.]*\(?", prose):
        token = m.group(0)
        add(token.rstrip("("), PROSE_WEIGHT, require_shape=not token.endswith("("))
    for block in code:
        block = _file_names_only(block)
        for m in re.finditer(r"[A-Za-z_][\w.]*\(?", block):
            token = m.group(0)
            # In code, a call or a dotted/CamelCase/snake name is code; a bare lower word may be a
            # variable (`x`, `expr`) and is left to the keyword leg.
            shaped = token.endswith("(") or code_shaped(token.rstrip("(")) or token[:1].isupper()
            if shaped:
                add(token.rstrip("("), CODE_WEIGHT, require_shape=False)
    for frame in frames:
        if frame.function and not frame.function.startswith("<"):
            add(frame.function, FRAME_WEIGHT / (1 + frame.depth), require_shape=False)
    ranked = sorted(weights.items(), key=lambda item: -item[1])[:MAX_IDENTIFIERS]
    return dict(ranked)


def _file_names_only(code: str) -> str:
    """`code` with each file path in it cut to its file name: a traceback's directories
    (`C:\\Users\\me\\AppData\\...`, `/Users/me/Documents/...`) would read as CamelCase names, and
    the file name is what says which file it is."""
    code = _FRAME.sub(lambda m: m.group(0).replace(m.group(1), _file_name(m.group(1)), 1), code)
    return _PATH.sub(lambda m: _file_name(m.group(1)), code)


def _file_name(path: str) -> str:
    return _PATH_SEPARATOR.split(path)[-1]


def _pieces(parsed: IssueQuery) -> list[str]:
    """Embedding inputs: the title with the start of the prose, then the rest of the prose in
    window-sized slices (`PROSE_PIECES` in all), then the error lines and the first code block; the
    first `MAX_PIECES` of these."""
    prose_words = parsed.prose.split()
    pieces = []
    if prose_words:
        pieces.append(" ".join(prose_words[:PIECE_WORDS]))
    for start in range(PIECE_WORDS, len(prose_words), PIECE_WORDS):
        if len(pieces) >= PROSE_PIECES:
            break
        piece = " ".join(prose_words[start : start + PIECE_WORDS])
        if len(words(piece)) >= 5:
            pieces.append(piece)
    if parsed.errors:
        pieces.append(f"{parsed.title}\n" + "\n".join(parsed.errors[:3]))
    if parsed.code:
        pieces.append(" ".join(parsed.code[0].split()[:PIECE_WORDS]))
    if not pieces and parsed.text.strip():
        pieces.append(" ".join(parsed.text.split()[:PIECE_WORDS]))
    return pieces[:MAX_PIECES]


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
