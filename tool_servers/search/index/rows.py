"""The shapes of the chunk rows a LanceDB query returns, and the one place they are read.

LanceDB types `to_list()` as bare dicts; the columns a query selects fix their keys. Each shape
below names one such selection (`store.chunk_schema` has the column types), and `fetch` is where
an untyped row list becomes one of them, so every reader after it is checked.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, NotRequired, TypedDict, TypeVar, cast

if TYPE_CHECKING:
    from lancedb.query import LanceQueryBuilder


class ChunkMeta(TypedDict):
    """A chunk without its text: what `VectorMatrix` keeps in memory for every chunk."""

    id: str
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    name: str | None
    """Lower-cased last component of `symbol`."""
    kind: str
    _score: NotRequired[float]
    """BM25 score, on rows of the full-text leg."""
    _distance: NotRequired[float]
    """Cosine distance, on rows of a vector leg."""


class ChunkRow(ChunkMeta):
    """A chunk with its text: the rows of the retrieval legs (`query._COLUMNS`)."""

    text: str


class ModuleText(TypedDict):
    """A module-level chunk's path and text, for the imports it makes."""

    path: str
    text: str


class ChunkText(TypedDict):
    """A chunk's text by id, for the few hits shown whose rows had none."""

    id: str
    text: str


class OutlineRow(TypedDict):
    """A chunk as the repository map reads it."""

    path: str
    symbol: str | None
    kind: str
    signature: str | None
    start_line: int
    text: str


class DefinitionRow(OutlineRow):
    """A chunk as `find_symbol` reads it."""

    end_line: int


Row = TypeVar("Row", bound=Mapping[str, object])


def fetch(query: "LanceQueryBuilder", shape: type[Row]) -> list[Row]:
    """The rows of `query`, as `shape`: the columns it selected."""
    return cast("list[Row]", query.to_list())
