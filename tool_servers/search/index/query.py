"""Hybrid retrieval: vector and keyword rankings fused by reciprocal rank fusion, plus boosts.

RRF (Cormack et al., 2009) adds 1/(K + rank) over the rankings a chunk appears in; it needs no
score calibration between cosine distances and BM25 scores, which live on unrelated scales.
On top of it, boosts over the candidates of both legs: a chunk containing all of the query's
words gains (coverage); a chunk whose symbol name is a code identifier in a short query gets a
boost larger than any other score, so a query naming a function finds its definition first; a
name that is only a plain word of a one- or two-word query ("sleep") gets a smaller boost, a file
named like it smaller still.

Functions here are blocking (LanceDB's sync API); `CodeIndex.search` runs them in threads.
"""

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tool_servers.search.errors import InvalidQuery
from tool_servers.search.index.chunks import Chunk
from tool_servers.search.index.rows import ChunkRow, ModuleText, fetch
from tool_servers.search.models import SearchHit

if TYPE_CHECKING:
    from lancedb.table import Table

SearchMode = Literal["hybrid", "vector", "keyword"]

# Fusion constants, chosen with benchmarks/retrieval_eval.py (docstring-sentence queries over
# installed libraries, file MRR@10 pooled): plain RRF of the two legs ranked below the keyword leg
# alone until the query-term coverage boost was added. K=60 is the constant of Cormack et al.;
# smaller K or a heavier keyword weight did worse than the boost.
RRF_K = 60
VECTOR_WEIGHT = 1.0
KEYWORD_WEIGHT = 1.0
# Boosts are in RRF units: the largest fused score is 2 / 61 = 0.033.
# Coverage: a chunk holding every content word of the query is a strong lexical match that BM25's
# rank alone undersells (it also rewards one rare word repeated). Scaled by coverage squared, so
# half the words earn a quarter: partial matches of a prose query barely move.
COVERAGE_BOOST = 0.06
CODE_NAME_BOOST = 0.2  # > RRF + coverage: a code identifier's definition always comes first
QUALIFIED_BOOST = 0.06
WORD_NAME_BOOST = 0.04
PATH_BOOST = 0.01
FIRST_PIECE_BOOST = 0.002
# A plain word naming a symbol ("run", "sleep") means that symbol only in a short query; in a
# sentence it is just a word, and boosting every function called "run" would bury the answer.
SHORT_QUERY_WORDS = 2
# In a longer query a code identifier is often a side mention ("like `open_file` but ..."): there
# it only nudges by a few ranks. The full boost in queries of more than 3 terms cost 0.028 MRR on
# the benchmark above; granting it up to 6 terms cost 0.023.
LONG_QUERY_TERMS = 3
LONG_QUERY_NAME_BOOST = 0.002
_COLUMNS = ["id", "path", "start_line", "end_line", "symbol", "name", "kind", "text"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves code function method class file
    find show me get""".split()
)


@dataclass(frozen=True, slots=True)
class Identifier:
    name: str
    """Last component, lower-cased: compared with the `name` column."""
    qualified: str
    """As written (`Client.send`)."""
    code_shaped: bool
    """Has `_`, `.`, inner capitals, backticks or a call: the user means a symbol."""


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    text: str
    words: list[str]
    """Lower-cased words that are not stop words."""
    identifiers: list[Identifier]
    fts_text: str
    """Words and identifier parts for the full-text leg."""
    terms: int
    """Whitespace-separated tokens that are not stop words: the query's length in ideas."""


def split_identifier(word: str) -> list[str]:
    """`HTTPClientError` -> http, client, error; `open_tcp_stream` -> open, tcp, stream."""
    return [p.lower() for piece in word.split("_") for p in _CAMEL_PART.findall(piece)]


def terms_of(chunk: Chunk) -> str:
    """The full-text column: text, plus camelCase identifiers split into words (LanceDB's tokenizer
    splits at '_' but not at case changes), plus the path and symbol as words."""
    extra = {
        p
        for ident in set(_IDENT.findall(chunk.text))
        if _CAMEL.search(ident)
        for p in split_identifier(ident)
    }
    head = " ".join(
        [
            *split_identifier(chunk.path.replace("/", "_").replace(".", "_")),
            *split_identifier(chunk.symbol or ""),
        ]
    )
    return f"{head}\n{chunk.text}\n{' '.join(sorted(extra))}"


def parse_query(query: str) -> ParsedQuery:
    """Split a query into words and identifiers.

    Raises:
        InvalidQuery: empty, or nothing but stop words.
    """
    text = query.strip()
    if not text:
        raise InvalidQuery("the query is empty: describe the code you want or name an identifier")
    identifiers = []
    for match in _IDENT.finditer(text):
        token = match.group(0)
        after = text[match.end() : match.end() + 1]
        before = text[match.start() - 1 : match.start()] if match.start() else ""
        shaped = (
            "_" in token
            or "." in token
            or bool(_CAMEL.search(token))
            or after == "("
            or before == after == "`"
        )
        identifiers.append(Identifier(token.rsplit(".", 1)[-1].lower(), token, shaped))
    words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]
    if not words and not any(i.code_shaped for i in identifiers):
        raise InvalidQuery(
            f"the query {query!r} has only common words (like 'the', 'of', 'how'): "
            "add what the code does or a name it uses"
        )
    parts = [p for i in identifiers if i.code_shaped for p in split_identifier(i.qualified.replace(".", "_"))]
    fts_words = list(dict.fromkeys([*words, *parts]))
    terms = sum(1 for i in identifiers if i.qualified.lower() not in STOP_WORDS)
    return ParsedQuery(text, words, identifiers, " ".join(fts_words), terms)


def vector_leg(table: "Table", vector: Sequence[float], *, limit: int) -> list[ChunkRow]:
    from lancedb.query import LanceVectorQueryBuilder

    query = table.search(vector, vector_column_name="vector")
    if not isinstance(query, LanceVectorQueryBuilder):  # what a vector query always builds
        raise TypeError(f"lancedb built a {type(query).__name__} for a vector query")
    return fetch(query.distance_type("cosine").select(_COLUMNS).limit(limit), ChunkRow)


def keyword_leg(table: "Table", parsed: ParsedQuery, *, limit: int) -> list[ChunkRow]:
    from lancedb.query import MatchQuery

    if not parsed.fts_text:
        return []
    query = MatchQuery(parsed.fts_text, "terms")  # pyright: ignore[reportCallIssue] - lancedb's MatchQuery gives the other parameters defaults at run time
    return fetch(table.search(query, query_type="fts").select([*_COLUMNS, "_score"]).limit(limit), ChunkRow)


def name_leg(table: "Table", parsed: ParsedQuery, *, limit: int = 200) -> list[ChunkRow]:
    """Chunks defining any name the query mentions (exact, case-insensitive)."""
    names = sorted({i.name for i in parsed.identifiers if i.code_shaped or i.name in parsed.words})
    if not names:
        return []
    quoted = ", ".join("'" + n.replace("'", "''") + "'" for n in names)
    return fetch(table.search().where(f"name IN ({quoted})").select(_COLUMNS).limit(limit), ChunkRow)


def definition_leg(table: "Table", names: Sequence[str], *, limit: int = 2000) -> list[ChunkRow]:
    """Function, class and method chunks whose name is one of `names` (lower-cased)."""
    if not names:
        return []
    quoted = ", ".join("'" + n.replace("'", "''") + "'" for n in names)
    where = f"name IN ({quoted}) AND kind IN ('function', 'class', 'method')"
    return fetch(table.search().where(where).select(_COLUMNS).limit(limit), ChunkRow)


def imports_leg(table: "Table", paths: Sequence[str], known: set[str]) -> dict[str, list[str]]:
    """path -> the indexed files its module-level code imports, for each of `paths`."""
    from tool_servers.search.index.filerank import imports_of

    if not paths:
        return {}
    quoted = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
    rows = (
        table.search().where(f"path IN ({quoted}) AND kind = 'module'").select(["path", "text"]).limit(None)
    )
    texts: dict[str, list[str]] = defaultdict(list)
    for row in fetch(rows, ModuleText):
        texts[row["path"]].append(row["text"])
    return {p: imports_of(p, "\n".join(t), known) for p, t in texts.items()}


def fuse(
    parsed: ParsedQuery,
    rankings: Sequence[tuple[float, list[ChunkRow]]],
    named: list[ChunkRow],
    *,
    k: int,
    per_file: bool = False,
    boosts: bool = True,
) -> list[SearchHit]:
    """Weighted reciprocal rank fusion of `(weight, ranking)` pairs, plus identifier boosts over
    those and the `named` rows."""
    rows: dict[str, ChunkRow] = {}
    scores: dict[str, float] = defaultdict(float)
    for weight, ranking in rankings:
        for rank, row in enumerate(ranking):
            rows.setdefault(row["id"], row)
            scores[row["id"]] += weight / (RRF_K + rank + 1)
    if boosts:
        for row in named:
            rows.setdefault(row["id"], row)
            scores.setdefault(row["id"], 0.0)
        _apply_boosts(parsed, rows, scores)
    ordered = sorted(rows, key=lambda i: (-scores[i], rows[i]["path"], rows[i]["start_line"]))
    if per_file:
        ordered = _best_per_file(ordered, rows)
    return [_hit(rows[i], scores[i]) for i in ordered[:k]]


def _stem(word: str) -> str:
    # Enough to match "edits"/"edit", "closing"/"close", "created"/"create"; not a real stemmer.
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _apply_boosts(parsed: ParsedQuery, rows: dict[str, ChunkRow], scores: dict[str, float]) -> None:
    short = parsed.terms <= LONG_QUERY_TERMS
    # A query word is present when some word of the chunk starts with its stem: cheap enough to
    # run over every candidate per query, and "edit" finds "edits", "editor", "edit_file".
    stems = sorted({_stem(w) for w in parsed.words}, key=len, reverse=True)
    wanted = re.compile(r"(?<![a-z0-9])(" + "|".join(map(re.escape, stems)) + ")") if stems else None
    code = {i.name for i in parsed.identifiers if i.code_shaped}
    qualified = {i.qualified.lower() for i in parsed.identifiers if "." in i.qualified}
    plain = set(parsed.words) if len(parsed.words) <= SHORT_QUERY_WORDS else set()
    first_piece: dict[tuple[str, str | None], int] = {}
    for row in rows.values():
        if row["symbol"] is not None:
            key = (row["path"], row["symbol"])
            first_piece[key] = min(first_piece.get(key, row["start_line"]), row["start_line"])
    for rid, row in rows.items():
        name = (row["name"] or "").lower()
        boost = 0.0
        if name and name in code:
            boost += CODE_NAME_BOOST if short else LONG_QUERY_NAME_BOOST
            if (row["symbol"] or "").lower() in qualified:
                boost += QUALIFIED_BOOST if short else LONG_QUERY_NAME_BOOST
        elif name and name in plain:
            boost += WORD_NAME_BOOST
        if boost and first_piece.get((row["path"], row["symbol"])) == row["start_line"]:
            boost += FIRST_PIECE_BOOST  # of a long definition's pieces, the one with its `def` line
        stem = row["path"].rsplit("/", 1)[-1].split(".", 1)[0].lower()
        if stem in code or stem in plain:
            boost += PATH_BOOST
        if wanted is not None:
            coverage = len(set(wanted.findall(row["text"].lower()))) / len(stems)
            boost += COVERAGE_BOOST * coverage**2
        scores[rid] += boost


def _hit(row: ChunkRow, score: float) -> SearchHit:
    return SearchHit(
        path=row["path"],
        start_line=row["start_line"],
        end_line=row["end_line"],
        symbol=row["symbol"],
        score=round(score, 6),
        snippet=row["text"],
    )


def _best_per_file(ordered: list[str], rows: dict[str, ChunkRow]) -> list[str]:
    """One hit per file: its best chunk, with that chunk's score. Adding the file's other chunks
    (best + a quarter of the next two) favoured long files and cost 0.05 MRR on the docstring
    benchmark, so a file is as good as its best chunk."""
    seen: set[str] = set()
    best = []
    for rid in ordered:
        if rows[rid]["path"] not in seen:
            seen.add(rows[rid]["path"])
            best.append(rid)
    return best
