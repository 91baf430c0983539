"""Every chunk vector of an index in one matrix, for many query vectors at once.

An issue is embedded in several pieces, and each piece needs its own nearest chunks. LanceDB's
flat (unindexed) vector search scans the table once per query vector, so a many-piece issue on a
large repository pays for many scans. Reading the vectors once per index version and answering
every piece with one matrix product costs one scan, at the cost of the matrix in memory
(dimension x 4 bytes a chunk: 77 MB for 50,000 chunks of 384 dimensions), which a search server
keeps while the index does not change.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tool_servers.search.index.rows import ChunkMeta, ChunkText, fetch

if TYPE_CHECKING:
    from lancedb.table import Table

_META = ["id", "path", "start_line", "end_line", "symbol", "name", "kind"]


class VectorMatrix:
    """The chunk vectors of one index version, with the columns a file ranking needs."""

    def __init__(self, table: "Table", *, dimension: int) -> None:
        data = table.search().select([*_META, "vector"]).limit(None).to_arrow()
        column = data.column("vector").combine_chunks()
        flat = column.flatten().to_numpy(zero_copy_only=False)
        self.matrix = np.ascontiguousarray(flat, dtype=np.float32).reshape(len(data), dimension)
        self._columns = {name: data.column(name).to_pylist() for name in _META}

    def __len__(self) -> int:
        return self.matrix.shape[0]

    def nearest(self, queries: np.ndarray, *, limit: int) -> list[list[ChunkMeta]]:
        """For each query row, the `limit` nearest chunks (cosine; vectors are unit norm), nearest
        first, as rows with `_distance` = 1 - cosine and no `text` (fetch it for the few shown)."""
        if not len(self):
            return [[] for _ in range(len(queries))]
        similarity = self.matrix @ np.asarray(queries, dtype=np.float32).T
        n = min(limit, len(self))
        out = []
        for column in similarity.T:
            top = np.argpartition(-column, n - 1)[:n]
            top = top[np.argsort(-column[top], kind="stable")]
            out.append([self._row(int(i), float(column[i])) for i in top])
        return out

    def _row(self, i: int, similarity: float) -> ChunkMeta:
        column = self._columns
        return ChunkMeta(
            id=column["id"][i],
            path=column["path"][i],
            start_line=column["start_line"][i],
            end_line=column["end_line"][i],
            symbol=column["symbol"][i],
            name=column["name"][i],
            kind=column["kind"][i],
            _distance=1.0 - similarity,
        )


def texts_by_id(table: "Table", ids: Sequence[str]) -> dict[str, str]:
    """The `text` of the chunks `ids`, in one query."""
    if not ids:
        return {}
    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
    rows = fetch(table.search().where(f"id IN ({quoted})").select(["id", "text"]).limit(None), ChunkText)
    return {r["id"]: r["text"] for r in rows}
