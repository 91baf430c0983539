"""File-level ranking: which files an issue is about, from every piece of evidence at once.

The chunk legs (keyword over the whole query, keyword over its title and identifiers, and one
vector search per embedding piece of the issue) are aggregated per file, ranked, and fused by
reciprocal rank fusion; then explicit evidence is added: files the issue names (a path, a file
name, a dotted module, a traceback frame, the innermost frames most), files defining the
identifiers it uses (weighted by where the name appears and divided among the files defining it,
so a name defined once is strong evidence and `__init__` is none), files named like those
identifiers, and the modules that the definitions of deliberately named names import in their
bodies (one step along the code the issue's entry point runs), and, when the issue's examples
were run, the files of the tracebacks they raised. Test files rank after source
files unless the caller asks for tests. Spreading score to the modules a top file imports is
implemented (`NEIGHBOUR_SHARE`) but off: it cost MRR at every share tried.

Constants were chosen on the tune half (65 cases) of a development set of real bug reports of
one large Python project, the files of the reference fix as the answer
(`benchmarks/localization_eval.py`), one constant at a time over a coarse grid with the others
held; each note gives file Acc@1 / MRR of the tune half at the values tried, each case searched
in the nearest indexed checkout. The notes of the older constants were measured before the newer
ones existed; with every constant as it is, the tune half scores 0.738 / 0.820, R@10 0.877, and
a grid over each constant again finds none better than its value here. Values were rounded to
what is a reasonable default for any repository, never fitted to its names.
"""

import functools
import math
import posixpath
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from tool_servers.search.index.query_parts import IssueQuery
from tool_servers.search.index.rows import ChunkMeta, ChunkRow

# Fusion constants (see the module docstring for how they were chosen).
FILE_RRF_K = 10
"""Tune half: K=5 0.656/0.770, 10 0.703/0.798, 20 0.656/0.777, 60 (the chunk fusion's) 0.594/0.730."""
"""RRF constant over file ranks: smaller than the chunk fusion's 60 because there are ~50x fewer
files than chunks and the first few file ranks are where the answer is."""
KEYWORD_WEIGHT = 1.0
"""Tune half: 0.5 0.594/0.741, 1.0 0.656/0.771, 2.0 0.641/0.759."""
TITLE_KEYWORD_WEIGHT = 0.5
"""Tune half: 0 0.688/0.785, 0.5 0.703/0.798, 1.0 0.703/0.797."""
VECTOR_WEIGHT = 1.0
"""Shared by the embedding pieces: piece i weighs `PIECE_DECAY**i` of it, normalised to sum 1.
Tune half: 0 (no vectors) 0.641/0.756, 0.5 0.703/0.795, 1.0 0.703/0.798, 1.5 0.672/0.785."""
PIECE_DECAY = 0.6
"""Tune half: 0.3 0.656/0.772, 0.6 0.656/0.771, 1.0 (equal pieces) 0.625/0.755."""
CHUNK_DECAY = 0.5
"""A file's keyword score: its best chunk's BM25 plus `CHUNK_DECAY**i` of the i-th next (up to
`CHUNKS_PER_FILE`): evidence spread over a file counts, a long file's many weak chunks little.
Tune half: 0 0.594/0.741, 0.25 0.656/0.772, 0.5 0.656/0.771, 0.8 0.656/0.771."""
CHUNKS_PER_FILE = 3
"""Tune half: 1 chunk (a file is its best chunk) 0.594/0.741, 3 0.656/0.771, 10 0.656/0.772."""
PATH_BOOST = 0.2
"""A file the issue names by path outright. Tune half: 0 0.688/0.790, 0.05 and up 0.703/0.797."""
MODULE_BOOST = 0.02
"""A file a dotted name of the issue resolves to (`pkg.sub.mod`, `from pkg.sub import x`): often
an import in a pasted session, which says what the writer used, not where the bug is. Tune half:
0 0.703/0.798, 0.02 0.703/0.798, 0.1 0.672/0.782, 0.2 (as strong as a path) 0.656/0.771."""
BASENAME_BOOST = 0.08
"""A file named by its bare file name, divided among the files of that name."""
FRAME_BOOST = 0.15
"""The innermost traceback frame inside the repository; its callers get `FRAME_DECAY**depth`."""
FRAME_DECAY = 0.5
"""Tune half: FRAME_BOOST 0 0.641/0.760, 0.15 0.656/0.771, 0.3 0.656/0.771 (few issues carry frames)."""
DEFINITION_BOOST = 0.03
"""Per unit of identifier weight (title 3, backticks 2, prose 1, code 0.5), divided among the
files defining the name; capped per file by `DEFINITION_CAP`."""
DEFINITION_CAP = 0.15
"""Tune half: DEFINITION_BOOST 0 0.672/0.768, 0.02 0.703/0.798, 0.03 0.719/0.805, 0.06 0.703/0.797;
cap 0.05 0.703/0.797, 0.15 0.703/0.798, 0.3 0.688/0.790. A qualified name (`Class.method`,
`pkg.func`) gains its boost once per chunk of the definition it matches, so a long definition
counts more than a short one of the same name; counting each definition once cost two tune cases
(0.738/0.820 -> 0.708/0.805): the long function is where more of the behaviour lives."""
MAX_DEFINING_FILES = 8
"""Tune half: 2 0.641/0.764, 8 0.656/0.771, 16 0.656/0.772."""
"""A name defined in more files than this (`__init__`, `_print`, `doit`) says nothing about which."""
NAMED_FILE_BOOST = 0.01
"""A file named like a name the issue uses (`sqrtdenest` -> `sqrtdenest.py`, `ConditionSet` ->
`conditionset.py`), per unit of identifier weight, divided among the files of that name; capped
per file by `NAMED_FILE_CAP`. A module is often named for what it defines, and the name may be
written where no definition of it matches (a plural, another case). Tune half (65 cases): 0
0.708/0.805, 0.005 to 0.02 0.738/0.820, 0.04 0.723/0.813."""
NAMED_FILE_CAP = 0.1
"""Tune half: caps 0.03 to 0.2 alike."""
MAX_NAMED_FILES = 2
"""A name shared by more files (`utils`, `base`) says nothing about which. Tune half: 1, 2 and 4
alike."""
BODY_IMPORT_BOOST = 0.01
"""A module imported inside the definition of a name the issue names deliberately (in the title
or in backticks: weight >= `BODY_IMPORT_MIN_WEIGHT`), per unit of that weight, divided among the
definition's imports. A function-level import is how a large codebase reaches the code that does
the work (`lambdify` imports its printers inside), and the fix is often there rather than in the
entry point the issue names. Tune half: 0 0.723/0.813, 0.005 to 0.02 0.738/0.820, 0.04
0.708/0.809."""
BODY_IMPORT_MIN_WEIGHT = 2.0
"""Tune half: minimum weights 1, 2 and 3 alike; 2 keeps names mentioned in passing out."""
NEIGHBOUR_SHARE = 0.0
"""Fraction of a top file's score given to the modules it imports."""
NEIGHBOUR_TOP = 5
"""Tune half: share 0 0.719/0.805, 0.02 0.703/0.797, 0.05 0.688/0.789, 0.1 0.609/0.750."""
RAISED_BOOST = 0.15
"""The innermost repository frame of an exception the query's examples raised (its callers get
`FRAME_DECAY**depth` of it): the reported error reproduced, so weighed as the innermost frame of a
pasted traceback is (`FRAME_BOOST`). On the tune half (65 cases, examples without setup), 8 runs
raised inside the repository and all 8 innermost frames were in the file of the fix; those 8 were
ranked first already, so 0.05 to 0.3 leave the figures unchanged there. The value is
`FRAME_BOOST`'s, not fitted."""
EXECUTED_AFTER = 5
"""With the files the query's examples executed (`search --run-examples`): the ranks kept for the
static evidence before the executed files get their slots."""
EXECUTED_SLOTS = 5
"""The ranks after `EXECUTED_AFTER` given to executed files, best static score first. On the tune
half (65 cases, exact checkouts; the examples run with the project's interactive-session
preamble), the examples executed something in 45 cases and the file of the fix in 40 of those,
including fixes one or two calls away from the entry point the issue names, which no keyword or
vector leg finds. But an example executes 10-72 files (p10-p90), most of them core code every
example runs, so execution ranks files poorly on its own, and mixed into the scores it moved
nothing or cost Acc@1 (an additive 0.01: alike; 0.05: Acc@1 0.723 -> 0.692; scores x1.5: 0.692).
Sharing the top ten keeps the static head and lets execution fill the tail: R@10 0.877 -> 0.908,
MRR 0.812 -> 0.814, Acc@1 0.723 unchanged. (After, slots): (3, 5), (7, 3) and (7, 5) 0.892,
(3, 3) and (5, 3) 0.877. Without the preamble the examples ran in 24 cases and R@10 stayed
0.877; taking the names they never define from the repository's packages, with their imports
untraced, they ran in 33, executed the fix in 30, and R@10 is 0.908 again; with names also taken
from where the project's doctests import them, they run in 48, execute the fix in 43, and R@10
stays 0.908."""
TEST_FACTOR = 0.5
"""Test files' scores are multiplied by this (unless tests are wanted), and a test file never
ranks above the source file it tests. Tune half: 0.1-0.5 equal (0.656/0.771), 1.0 0.656/0.769:
the gold files there are never tests, and source usually outranks its tests anyway."""

_PROSE_SUFFIXES = (".md", ".markdown", ".rst", ".rest", ".txt")
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*$|_tests?\.\w+$|(^|/)conftest\.py$")


def is_test_path(path: str) -> bool:
    """Under a `test/`, `tests/` or `testing/` directory, or named `test_*`, `*_test(s)`, `conftest.py`."""
    return bool(_TEST_PATH.search(path))


@dataclass(slots=True)
class Evidence:
    """What the retrieval legs returned for one query; `rank_files` turns it into a ranking."""

    issue: IssueQuery
    paths: Sequence[str]
    """Every indexed file."""
    keyword: list[ChunkRow] = field(default_factory=list)
    """Chunk rows of the full-text leg over the whole query, best first, with `_score`."""
    title_keyword: list[ChunkRow] = field(default_factory=list)
    """The same over the title and the code identifiers only: the words an issue is about,
    without the narrative that dilutes a whole-text match."""
    vector: list[list[ChunkMeta]] = field(default_factory=list)
    """One chunk ranking per embedding piece, in piece order."""
    definitions: list[ChunkRow] = field(default_factory=list)
    """Chunk rows defining a name the issue uses (function, class or method chunks)."""
    imports: dict[str, list[str]] = field(default_factory=dict)
    """path -> files it imports (resolved), for the top files only."""
    executed: dict[str, int] = field(default_factory=dict)
    """path -> functions of it that the query's examples ran (empty when none were run)."""
    raised: list[list[str]] = field(default_factory=list)
    """For each exception the query's examples raised inside the repository: the files of its
    traceback's frames, innermost first."""


@dataclass(frozen=True, slots=True)
class RankedFile:
    path: str
    score: float
    best: ChunkMeta | None
    """The file's best chunk row, for the hit's snippet; None for a file found by name only."""


def rank_files(evidence: Evidence, *, keep_tests: bool = False) -> list[RankedFile]:
    scores: dict[str, float] = defaultdict(float)
    best: dict[str, ChunkMeta] = {}
    known = set(evidence.paths)

    _add_rrf(scores, _aggregate_keyword(evidence.keyword, best), KEYWORD_WEIGHT)
    if evidence.title_keyword:
        _add_rrf(scores, _aggregate_keyword(evidence.title_keyword, best), TITLE_KEYWORD_WEIGHT)
    pieces = [r for r in evidence.vector if r]
    if pieces:
        norm = sum(PIECE_DECAY**i for i in range(len(pieces)))
        for i, rows in enumerate(pieces):
            ranked = _aggregate_vector(rows, best)
            _add_rrf(scores, ranked, VECTOR_WEIGHT * PIECE_DECAY**i / norm)

    for path, boost in mentioned_files(evidence.issue, evidence.paths).items():
        scores[path] += boost
    for path, boost in raised_files(evidence.raised, known).items():
        scores[path] += boost
    symbols = symbol_names(evidence.issue, evidence.paths)
    names = _names_used(symbols, evidence.definitions)
    for path, boost in _definition_boosts(symbols, names, evidence.definitions, best).items():
        scores[path] += boost
    for path, boost in named_files(symbols, evidence.paths).items():
        scores[path] += boost
    for path, boost in _body_import_boosts(names, evidence.definitions, known).items():
        scores[path] += boost

    if NEIGHBOUR_SHARE and evidence.imports:
        top = sorted(scores, key=lambda p: -scores[p])[:NEIGHBOUR_TOP]
        for path in top:
            for other in evidence.imports.get(path, []):
                if other in known and other != path:
                    scores[other] += NEIGHBOUR_SHARE * scores[path]

    if not keep_tests:
        _demote_tests(scores)
    order = [p for p in sorted(scores, key=lambda p: (-scores[p], p)) if p in known or p in best]
    if evidence.executed:
        order = _with_executed_slots(order, evidence.executed, known, keep_tests=keep_tests)
    return _ranked(order, scores, best)


def _with_executed_slots(
    order: list[str], executed: dict[str, int], known: set[str], *, keep_tests: bool
) -> list[str]:
    """`order` with ranks `EXECUTED_AFTER`+1 to +`EXECUTED_SLOTS` given to the best-ranked files
    the examples executed that are not above them (a file only executed, with no static evidence,
    comes after those that have some)."""
    head, ranked = order[:EXECUTED_AFTER], set(order)
    candidates = [*order[EXECUTED_AFTER:], *sorted(p for p in executed if p in known and p not in ranked)]
    slots = [p for p in candidates if p in executed and (keep_tests or not is_test_path(p))][:EXECUTED_SLOTS]
    taken = set(slots)
    return [*head, *slots, *(p for p in order[EXECUTED_AFTER:] if p not in taken)]


def _ranked(order: list[str], scores: dict[str, float], best: dict[str, ChunkMeta]) -> list[RankedFile]:
    """Files in `order`; a score never exceeds the one above it, so a file moved up by execution
    shows the score of its slot and the list stays sorted by score."""
    ranked: list[RankedFile] = []
    ceiling = math.inf
    for p in order:
        ceiling = min(ceiling, scores.get(p, 0.0))
        ranked.append(RankedFile(p, ceiling, best.get(p)))
    return ranked


def _add_rrf(scores: dict[str, float], ranked: list[str], weight: float) -> None:
    for rank, path in enumerate(ranked):
        scores[path] += weight / (FILE_RRF_K + rank + 1)


def _aggregate_keyword(rows: list[ChunkRow], best: dict[str, ChunkMeta]) -> list[str]:
    per_file: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        per_file[row["path"]].append(float(row.get("_score") or 0.0))
        best.setdefault(row["path"], row)
    total = {
        p: sum(s * CHUNK_DECAY**i for i, s in enumerate(sorted(v, reverse=True)[:CHUNKS_PER_FILE]))
        for p, v in per_file.items()
    }
    return sorted(total, key=lambda p: (-total[p], p))


def _aggregate_vector(rows: list[ChunkMeta], best: dict[str, ChunkMeta]) -> list[str]:
    seen: list[str] = []
    for row in rows:  # already nearest first: a file's rank is its best chunk's
        if row["path"] not in best:
            best[row["path"]] = row
        if row["path"] not in seen:
            seen.append(row["path"])
    return seen


def mentioned_files(issue: IssueQuery, paths: Sequence[str]) -> dict[str, float]:
    """Files the issue names: by path or path suffix, by file name, by dotted module, or in a
    traceback frame. Values are boosts in fused-score units."""
    index = _path_index(tuple(paths))
    by_suffix, by_name = index.by_suffix, index.by_name
    boosts: dict[str, float] = defaultdict(float)
    in_frames = {frame.path for frame in issue.frames}
    for written in issue.paths:
        if written in in_frames:
            continue  # a traceback's file: the frame boost below weighs it by its depth
        found = _by_suffix(by_suffix, written)
        if found and "/" in written:
            for p in found:
                boosts[p] = max(boosts[p], PATH_BOOST / len(found))
        else:
            same = by_name.get(posixpath.basename(written), [])
            for p in same:
                boosts[p] = max(boosts[p], BASENAME_BOOST / len(same))
    for dotted in issue.modules:
        for p in _module_files(by_suffix, dotted):
            boosts[p] = max(boosts[p], MODULE_BOOST)
    frame_boost: dict[str, float] = defaultdict(float)
    depth = 0
    for frame in issue.frames:
        found = _by_suffix(by_suffix, frame.path.replace("\\", "/"))
        if not found:
            continue  # outside the repository (the standard library, site-packages of others)
        for p in found:
            frame_boost[p] = max(frame_boost[p], FRAME_BOOST * FRAME_DECAY**depth / len(found))
        depth += 1
    for p, b in frame_boost.items():
        boosts[p] += b
    return dict(boosts)


def raised_files(raised: Sequence[Sequence[str]], known: set[str]) -> dict[str, float]:
    """Files in the tracebacks of the exceptions the query's examples raised: the innermost frame
    gets `RAISED_BOOST`, its callers `FRAME_DECAY**depth` of it; a file in several tracebacks
    keeps its largest boost."""
    boosts: dict[str, float] = defaultdict(float)
    for frames in raised:
        for depth, path in enumerate(p for p in frames if p in known):
            boosts[path] = max(boosts[path], RAISED_BOOST * FRAME_DECAY**depth)
    return dict(boosts)


@dataclass(frozen=True, slots=True)
class _PathIndex:
    by_suffix: dict[str, list[str]]
    """Every trailing run of path components (`c.py`, `b/c.py`, `a/b/c.py`) -> the files ending so."""
    by_name: dict[str, list[str]]
    """File name -> the files of that name."""
    by_stem: dict[str, list[str]]
    """File name without extension and leading underscores, lower-cased -> the code files so named."""


@functools.lru_cache(maxsize=8)
def _path_index(paths: tuple[str, ...]) -> _PathIndex:
    """The look-ups of an index's file list, built once per list (a search server answers many
    queries over the same files; building them costs ~10 ms for 1,500 files). Read-only."""
    by_suffix: dict[str, list[str]] = defaultdict(list)
    by_name: dict[str, list[str]] = defaultdict(list)
    by_stem: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        parts = p.split("/")
        for i in range(len(parts)):
            by_suffix["/".join(parts[i:])].append(p)
        by_name[parts[-1]].append(p)
        if not p.endswith(_PROSE_SUFFIXES):  # a page named for a function documents it
            by_stem[_stem(p).lower()].append(p)
    return _PathIndex(dict(by_suffix), dict(by_name), dict(by_stem))


def _by_suffix(index: dict[str, list[str]], written: str) -> list[str]:
    """The files whose path is the longest suffix of `written` found (an absolute path of another
    checkout still names this one's file)."""
    parts = [p for p in written.split("/") if p and p not in (".", "..")]
    for i in range(len(parts)):
        found = index.get("/".join(parts[i:]))
        if found:
            if i == len(parts) - 1 and len(found) > 1:
                return []  # only a bare name matched, and ambiguously: not a path mention
            return found
    return []


def _module_files(index: dict[str, list[str]], dotted: str) -> list[str]:
    """The file a dotted name's longest module prefix resolves to (`a.b.c.Name` -> `a/b/c.py`)."""
    parts = dotted.split(".")
    for n in range(len(parts), 1, -1):
        base = "/".join(parts[:n])
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            found = index.get(candidate)
            if found and len(found) == 1:
                return found
    return []


def symbol_names(issue: IssueQuery, paths: Sequence[str]) -> dict[str, float]:
    """The issue's identifiers without the dotted names that are module files of the repository
    (`pkg.utils.lambdify` is `pkg/utils/lambdify.py`): such a path is a mention of the file, which
    `mentioned_files` weighs; read as a name it would count again, as a definition of whatever the
    module defines under its own name (`lambdify` in `lambdify.py`). A package (`pkg.printing.pretty`)
    names no one file, so its name stays: what is named like it inside (`pretty/pretty.py`) is
    where it leads."""
    by_suffix = _path_index(tuple(paths)).by_suffix
    return {
        ident: weight
        for ident, weight in issue.identifiers.items()
        if "." not in ident or ident.replace(".", "/") + ".py" not in by_suffix
    }


@dataclass(slots=True)
class _NamesUsed:
    """The identifiers of an issue by bare lower-cased name, with the definitions found for them."""

    weight: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Summed over every place the name is written."""
    strongest: dict[str, float] = field(default_factory=dict)
    """The weight of the most deliberate place it is written (title, backticks, ...)."""
    written: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """The name as written, case kept (`subs`, `Subs`)."""
    defining: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Files defining the name, in any case."""
    same_case: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Files defining it spelt as written."""

    def meant(self, name: str) -> set[str]:
        """The files whose definitions of `name` are the ones the issue means: `x.subs(...)` is the
        method `subs`, not the class `Subs`, so where the name is defined as written only those
        count; else any case (a capitalised title word)."""
        return self.same_case.get(name) or self.defining.get(name, set())

    def other_case(self, symbol: str) -> bool:
        """A definition spelt otherwise than the issue writes its name, when another is spelt so."""
        name = symbol.rsplit(".", 1)[-1]
        return bool(self.same_case.get(name.lower())) and name not in self.written.get(name.lower(), ())


def _names_used(identifiers: dict[str, float], rows: list[ChunkRow]) -> _NamesUsed:
    names = _NamesUsed()
    for ident, weight in identifiers.items():
        last = ident.rsplit(".", 1)[-1]
        names.weight[last.lower()] += weight
        names.strongest[last.lower()] = max(weight, names.strongest.get(last.lower(), 0.0))
        names.written[last.lower()].add(last)
    for row in rows:
        name = (row.get("name") or "").lower()
        if name in names.weight:
            names.defining[name].add(row["path"])
            if (row.get("symbol") or "").rsplit(".", 1)[-1] in names.written[name]:
                names.same_case[name].add(row["path"])
    return names


def _definition_boosts(
    identifiers: dict[str, float],
    names: _NamesUsed,
    rows: list[ChunkRow],
    best: dict[str, ChunkMeta],
) -> dict[str, float]:
    qualified = {ident.lower(): weight for ident, weight in identifiers.items() if "." in ident}
    boosts: dict[str, float] = defaultdict(float)
    for name in names.defining:
        files = names.meant(name)
        if len(files) > MAX_DEFINING_FILES:
            continue
        share = DEFINITION_BOOST * names.weight[name] / len(files)
        for p in files:
            boosts[p] += share
    for row in rows:  # per chunk: a long definition, several chunks, counts more (see the note)
        symbol = row.get("symbol") or ""
        if not symbol or names.other_case(symbol):
            continue
        symbol = symbol.lower()
        for q, weight in qualified.items():
            if symbol == q or q.endswith("." + symbol) or symbol.endswith("." + q):
                boosts[row["path"]] += DEFINITION_BOOST * weight
                best.setdefault(row["path"], row)
    return {p: min(b, DEFINITION_CAP) for p, b in boosts.items()}


def named_files(identifiers: dict[str, float], paths: Sequence[str]) -> dict[str, float]:
    """Files whose name (without extension and leading underscores) is one of `identifiers`
    (an issue's, with their weights), case aside. Values are boosts in fused-score units."""
    by_stem = _path_index(tuple(paths)).by_stem
    boosts: dict[str, float] = defaultdict(float)
    for ident, weight in identifiers.items():
        files = by_stem.get(ident.rsplit(".", 1)[-1].lstrip("_").lower(), [])
        if not files or len(files) > MAX_NAMED_FILES:
            continue
        for p in files:
            boosts[p] += NAMED_FILE_BOOST * weight / len(files)
    return {p: min(b, NAMED_FILE_CAP) for p, b in boosts.items()}


def _body_import_boosts(names: _NamesUsed, rows: list[ChunkRow], known: set[str]) -> dict[str, float]:
    """The modules that definitions of deliberately named names import in their bodies."""
    share: dict[str, float] = defaultdict(float)
    for row in rows:
        name = (row.get("name") or "").lower()
        weight = names.strongest.get(name, 0.0)
        if weight < BODY_IMPORT_MIN_WEIGHT or "import" not in (row.get("text") or ""):
            continue
        if len(names.defining.get(name, ())) > MAX_DEFINING_FILES:
            continue  # a name defined everywhere names no entry point
        imported = [p for p in imports_of(row["path"], row["text"], known) if p != row["path"]]
        for p in imported:
            share[p] = max(share[p], weight / len(imported))
    return {p: BODY_IMPORT_BOOST * w for p, w in share.items()}


def _stem(path: str) -> str:
    return posixpath.splitext(posixpath.basename(path))[0].lstrip("_")


def _demote_tests(scores: dict[str, float]) -> None:
    """Scale test files down, and keep each below the source file it tests (`tests/test_x.py`
    and `x.py` of the same package) when that file is a candidate."""
    by_stem: dict[str, list[str]] = defaultdict(list)
    for p in scores:
        if not is_test_path(p):
            by_stem[_stem(p)].append(p)
    for p in list(scores):
        if not is_test_path(p):
            continue
        scores[p] *= TEST_FACTOR
        stem = posixpath.splitext(posixpath.basename(p))[0]
        stem = re.sub(r"^test_|_tests?$", "", stem).lstrip("_")
        for source in by_stem.get(stem, []):
            if scores[p] >= scores[source]:
                scores[p] = math.nextafter(scores[source], -math.inf)


_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+\(?([\w, \t*]+)|import[ \t]+([\w.]+))", re.M
)


def imports_of(path: str, text: str, known: set[str]) -> list[str]:
    """The indexed files that the Python code `text` of `path` imports (absolute and relative
    imports; `from a import b` counts `a/b.py` when that is a module, else `a`)."""
    package = posixpath.dirname(path).split("/") if posixpath.dirname(path) else []
    found: list[str] = []
    for m in _IMPORT_LINE.finditer(text):
        if m.group(3):
            targets = [m.group(3)]
        else:
            base = m.group(1)
            dots = len(base) - len(base.lstrip("."))
            if dots:
                up = package[: len(package) - dots + 1] if dots - 1 <= len(package) else []
                base = ".".join([*up, base.lstrip(".")]).strip(".")
            names = [n for n in re.split(r"[\s,]+", m.group(2)) if n and n != "*"]
            targets = [f"{base}.{n}" if base else n for n in names] + [base]
        for dotted in targets:
            module = dotted.replace(".", "/")
            for candidate in (f"{module}.py", f"{module}/__init__.py"):
                if candidate in known and candidate != path:
                    found.append(candidate)
                    break
    return list(dict.fromkeys(found))
