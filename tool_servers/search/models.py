"""Result contracts of the code index: what `codeloop index/search --json` print and what the
`search` MCP server returns. Paths are always relative to the repository root, POSIX-style."""

from typing import Literal

from pydantic import BaseModel, ConfigDict

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

ChunkKind = Literal["module", "function", "class", "method", "section", "text"]


class SearchHit(BaseModel):
    """One retrieved chunk. The shape is the `codeloop search --json` contract: keep it."""

    model_config = _FROZEN

    path: str
    """File path relative to the repository root."""
    start_line: int
    """First line of the snippet, 1-based."""
    end_line: int
    """Last line of the snippet, inclusive."""
    symbol: str | None
    """Qualified name of the function, class or method (`Class.method`), or the heading path of a
    document section; None for module headers and plain text windows."""
    score: float
    """Fused relevance: higher is better; comparable only within one result."""
    snippet: str
    """The chunk's source text, whole lines."""


EXAMPLE_TIMEOUT_S = 20.0
"""For a query's example statements, after the setup: a reproduction runs in seconds; an issue
about a hang would otherwise hold the search for the sandbox's whole limit."""


class ExampleFrame(BaseModel):
    """One frame of a traceback, in a repository file."""

    model_config = _FROZEN

    path: str
    line: int
    function: str


class RaisedError(BaseModel):
    """An exception an example statement raised out of the repository's code."""

    model_config = _FROZEN

    error: str
    """The exception's type name."""
    frames: list[ExampleFrame]
    """Its traceback's frames in repository files, innermost first."""


class ExampleRun(BaseModel):
    """What running the query's example code in the sandbox did (`search --run-examples`). The
    defaults describe a run that did not happen; `note` then says why."""

    model_config = _FROZEN

    statements: int = 0
    """Statements run (each top-level statement of the examples on its own)."""
    failed: int = 0
    """Statements that raised (often the very error the issue reports)."""
    timed_out: bool = False
    """The examples ran out of time; `files` holds what ran before."""
    files: dict[str, int] = {}
    """Repository file -> distinct functions of it that ran."""
    backend: Literal["gvisor", "process"] | None = None
    """Where they ran; None when nothing ran (no example code)."""
    python: str | None
    """The interpreter: the repository's virtualenv's, else codeloop's own."""
    setup_error: str | None = None
    """The setup code raised this (the examples still ran)."""
    raised: list[RaisedError] = []
    """Exceptions example statements raised inside the repository's code, in the order they ran
    (the first ten). Not here: a statement failing on a name of its own (no repository frame), or on
an import (a missing dependency is the environment's, not the bug's)."""
    resolved: list[str] = []
    """Names the examples used without defining them, taken from the repository's packages or from
    where its doctests import them."""
    note: str | None = None
    """Why nothing ran or what went wrong, for a person."""
    duration_s: float = 0.0


class SearchResult(BaseModel):
    """Hits for one query, best first."""

    model_config = _FROZEN

    query: str
    """The query as given."""
    hits: list[SearchHit]
    """Best first. With per-file aggregation, one hit per file (its best chunk, the file's score)."""
    examples: ExampleRun | None = None
    """With `--run-examples`: what the query's example code executed (it fills ranks of the file
    ranking); None otherwise."""


class SkippedFile(BaseModel):
    """A file the indexer looked at and left out."""

    model_config = _FROZEN

    path: str
    """Relative path."""
    reason: str
    """Why: `binary`, `not UTF-8 text`, `over size cap (N bytes)`, `generated`."""


class IndexReport(BaseModel):
    """What one build or update of the index did (`codeloop index --json`)."""

    model_config = _FROZEN

    repo: str
    """Absolute path of the repository."""
    index: str
    """Where the index lives: a directory or a LanceDB URI."""
    files: int
    """Files in the index after the update."""
    chunks: int
    """Chunks in the index after the update."""
    embedded: int
    """Chunks of new or changed files sent to the embedder in this update (the embedder's own
    cache may still have answered some of them without running the model)."""
    skipped: int
    """Files left out (binary, undecodable, too large, generated); see `skipped_files`."""
    changed_files: int
    """Files added or modified since the last update."""
    deleted_files: int
    """Files whose chunks were dropped because the file is gone or now skipped."""
    seconds: float
    """Wall time of the update."""
    skipped_files: list[SkippedFile] = []
    """The skipped files with reasons (at most 200 listed)."""
    messages: list[str] = []
    """Notes for a human: an index rebuilt because it was corrupt or built with another
    version or model, an empty repository."""


class IndexStatus(BaseModel):
    """The index as last seen by this process, without touching storage."""

    model_config = _FROZEN

    repo: str
    """Absolute path of the repository."""
    index: str
    """Directory or LanceDB URI."""
    table: str
    """LanceDB table name."""
    embedder: str
    """Embedding model identity."""
    schema_version: int
    """Layout version of the table; a different one triggers a rebuild."""
    files: int
    """Files indexed."""
    chunks: int
    """Chunks indexed."""
    version: int | None
    """LanceDB table version, None before the first update."""


class SymbolLocation(BaseModel):
    """Where a name is defined or used."""

    model_config = _FROZEN

    path: str
    """Relative path."""
    line: int
    """1-based line of the definition's `def`/`class` line, or of the reference."""
    end_line: int
    """Last line of the definition; equal to `line` for a reference."""
    symbol: str | None
    """Qualified name of the definition, or of the enclosing definition of a reference."""
    kind: str
    """Chunk kind of the definition (`function`, `class`, `method`) or `reference`."""
    text: str
    """The definition's signature line, or the referencing line, stripped."""


class SymbolResult(BaseModel):
    """Definitions of and references to one name."""

    model_config = _FROZEN

    name: str
    """The name looked up (a bare or dotted identifier)."""
    definitions: list[SymbolLocation]
    """Definitions, exact qualified-name matches first."""
    references: list[SymbolLocation]
    """Lines outside the definitions that use the name as a whole word, at most `limit`."""
    truncated: bool
    """True when more references exist than were returned."""


class RepoMapSymbol(BaseModel):
    """A top-level symbol in the repository map."""

    model_config = _FROZEN

    name: str
    """Qualified name."""
    kind: str
    """`function`, `class` or `method`."""
    line: int
    """1-based definition line."""
    signature: str
    """The definition line (`def f(x) -> int:`), stripped."""
    references: int
    """Other files that use this name."""


class RepoMapFile(BaseModel):
    """One file's outline."""

    model_config = _FROZEN

    path: str
    """Relative path."""
    score: int
    """Sum of its symbols' references: the rank key."""
    symbols: list[RepoMapSymbol]
    """Most referenced first."""


class RepoMap(BaseModel):
    """Per-file outlines ranked by how much the rest of the repository uses them."""

    model_config = _FROZEN

    files: list[RepoMapFile]
    """Most referenced files first, as many as fit the budget."""
    text: str
    """The outline rendered for a prompt."""
    tokens: int
    """Estimated tokens of `text` (see `tokens.estimate_tokens`)."""
    truncated: bool
    """True when files or symbols were left out to fit the budget."""
