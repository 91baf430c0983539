"""The LanceDB side of the index: two tables per repository, all calls blocking.

`<table>` holds one row per chunk (text, a derived `terms` column under a native full-text index,
and the vector, computed by us and stored plain so the table never depends on a model path);
`<table>_files` is the manifest, one row per indexed file with its content hash. Chunks are
written before the manifest, so a crash between the two leaves files that look changed and are
re-indexed next time, never a manifest that promises rows that are not there.

The chunk table's schema metadata records the layout version and the embedding model; a
mismatch, or data that cannot be read while loading the manifest, drops both tables and starts
over (`Store.rebuilt_reason` says why). Storage that fails for a reason of its own (permission
denied, a full disk, too many open files, EIO, a remote store timing out) is not damage: it raises
`IndexUnavailable` and leaves the tables as they are, since a rebuild would destroy a good index
and fail the same way (`storage_failure` tells the two apart). Callers run every method through
`anyio.to_thread`.
"""

import errno
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import numpy.typing as npt
import pyarrow as pa

from tool_servers.search.errors import IndexUnavailable

SCHEMA_VERSION = 1
FTS_COLUMN = "terms"
# Fold new rows into the full-text index once this many are unindexed: until then they are found
# by a flat scan, which costs less than rebuilding after every small edit.
FTS_BACKLOG_ROWS = 2000


_ENVIRONMENT_ERRNOS = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EFBIG,
        errno.EIO,
        errno.EMFILE,
        errno.ENFILE,
        errno.ENOMEM,
        errno.EAGAIN,
        errno.EBUSY,
        errno.EINTR,
        errno.ELOOP,
        errno.ETIMEDOUT,
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.ENOTCONN,
        errno.ESTALE,
    }
)
"""OS errors about the storage or the machine, not about what the index's files hold."""
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_REMOTE_TRANSPORT = re.compile(
    r"timed? ?out|connection|dns error|error sending request|forbidden|access ?denied|unauthori[sz]ed"
    r"|slow ?down|service unavailable|too many requests|credential",
    re.IGNORECASE,
)


def storage_failure(exc: BaseException, *, remote: bool) -> Literal["damaged", "unavailable"]:
    """Whether a failure to read or maintain the index means its data is damaged (rebuild it) or
    the storage is unavailable (leave the data alone and say why).

    By type and errno where there is one: Python's `OSError`, `TimeoutError` and
    `ConnectionError`. lancedb raises everything else as a bare `RuntimeError` ("lance error:
    LanceError(IO): ...") for damage and for a failing disk alike; the only trace of the cause is
    its text, which keeps Rust's `std::io::Error` rendering "... (os error N)". So the errno is read
    from there, and for a remote URI (s3://, gs://, az://; no errno at all) the object store's
    transport failures are recognised by their words. This is the one place that reads lancedb's
    messages.
    """
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return "unavailable"
    code = _errno_of(exc)
    if code is not None:
        return "unavailable" if code in _ENVIRONMENT_ERRNOS else "damaged"
    if remote and _REMOTE_TRANSPORT.search(str(exc)):
        return "unavailable"
    return "damaged"


def _errno_of(exc: BaseException) -> int | None:
    """The OS error behind `exc`: its own errno, or the one Rust's rendering names in its text."""
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    found = _RUST_OS_ERROR.search(str(exc))
    return int(found.group(1)) if found else None


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno:
        return exc.strerror or os.strerror(exc.errno)
    if (code := _errno_of(exc)) is not None:
        return f"{os.strerror(code)} (os error {code})"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


@dataclass(frozen=True, slots=True)
class IndexedFile:
    path: str
    file_hash: str
    chunks: int


def chunk_schema(dimension: int, embedder: str) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("path", pa.string(), nullable=False),
            pa.field("start_line", pa.int32(), nullable=False),
            pa.field("end_line", pa.int32(), nullable=False),
            pa.field("symbol", pa.string()),
            pa.field("name", pa.string()),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("signature", pa.string()),
            pa.field("text", pa.string(), nullable=False),
            pa.field(FTS_COLUMN, pa.string(), nullable=False),
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("embed_hash", pa.string(), nullable=False),
            pa.field("file_hash", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dimension), nullable=False),
        ],
        metadata={
            "codeloop.schema_version": str(SCHEMA_VERSION),
            "codeloop.embedder": embedder,
            "codeloop.dimension": str(dimension),
        },
    )


FILES_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("file_hash", pa.string(), nullable=False),
        pa.field("chunks", pa.int32(), nullable=False),
    ]
)


class Store:
    """The open tables of one repository's index."""

    def __init__(self, uri: str, table: str, *, embedder: str, dimension: int) -> None:
        # lancedb's Rust logger prints WARN lines on routine creates; it reads this once, at import.
        os.environ.setdefault("LANCEDB_LOG", "error")
        import lancedb

        self.uri = uri
        self.name = table
        self.schema = chunk_schema(dimension, embedder)
        self.rebuilt_reason: str | None = None
        try:
            # Readers re-check the latest version at most this often, so a long-lived searcher
            # sees what another process's indexer committed without reopening anything.
            self._db = lancedb.connect(uri, read_consistency_interval=timedelta(seconds=1))
        except Exception as exc:  # lancedb raises bare ValueError/OSError/RuntimeError by backend
            raise IndexUnavailable(f"cannot open the index at {uri}: {exc}") from exc
        self.files: dict[str, IndexedFile] = {}
        self.orphan_paths: set[str] = set()
        self.load()

    def load(self) -> None:
        """(Re)read the manifest; rebuild the tables when they are missing, stale or damaged.

        Raises:
            IndexUnavailable: the storage failed (see `storage_failure`); nothing was changed.
        """
        try:
            problem = self._try_load()
        except Exception as exc:  # lancedb raises bare RuntimeError/ValueError/OSError
            if storage_failure(exc, remote=self._remote) == "unavailable":
                raise IndexUnavailable(
                    f"cannot read the index at {self.uri}: {_cause(exc)}; it was left as it is: "
                    "fix the storage (permissions, free space, open files, the network) and retry"
                ) from exc
            problem = f"the index was unreadable ({type(exc).__name__}: {str(exc)[:200]})"
        if problem is not None:
            self.rebuilt_reason = problem if problem != "new" else None
            self._create_empty()

    def _try_load(self) -> str | None:
        try:
            self.chunks = self._db.open_table(self.name)
        except ValueError:  # lancedb's "Table ... was not found"
            return "new" if not self._remnant_exists() else "the index was incomplete"
        meta = self.chunks.schema.metadata or {}
        found = {k.decode(): v.decode() for k, v in meta.items()}
        wanted = {k.decode(): v.decode() for k, v in (self.schema.metadata or {}).items()}
        if found != wanted:
            return (
                f"the index was built with layout {found.get('codeloop.schema_version', '?')} and model "
                f"{found.get('codeloop.embedder', '?')}; this version needs layout {SCHEMA_VERSION} and model "
                f"{wanted['codeloop.embedder']}"
            )
        try:
            self._files = self._db.open_table(self._files_name)
        except ValueError:
            return "the index manifest was missing"
        manifest = self._files.to_arrow().to_pylist()
        self.files = {r["path"]: IndexedFile(r["path"], r["file_hash"], r["chunks"]) for r in manifest}
        # Reading the path column touches every data file: a damaged one fails here, not mid-query.
        paths = self.chunks.search().select(["path"]).limit(None).to_arrow().column("path").to_pylist()
        counts: dict[str, int] = {}
        for p in paths:
            counts[p] = counts.get(p, 0) + 1
        # Rows of files the manifest does not vouch for (a crash between the two writes) are redone.
        self.orphan_paths = {p for p, n in counts.items() if p not in self.files or self.files[p].chunks != n}
        self.orphan_paths |= {p for p, f in self.files.items() if f.chunks != counts.get(p, 0)}
        self._maintain_fts()  # a crash between the first write and the index build left none
        return None

    @property
    def _files_name(self) -> str:
        return self.name + "_files"

    @property
    def _remote(self) -> bool:
        return "://" in self.uri and not self.uri.startswith("file://")

    def _remnant_exists(self) -> bool:
        return "://" not in self.uri and os.path.exists(os.path.join(self.uri, self.name + ".lance"))

    def _create_empty(self) -> None:
        for name in (self.name, self._files_name):
            try:
                self._db.drop_table(name)
            except Exception:  # absent, or too damaged for lance to drop: remove the files ourselves
                if "://" not in self.uri:
                    shutil.rmtree(os.path.join(self.uri, name + ".lance"), ignore_errors=True)
        try:
            self.chunks = self._db.create_table(self.name, schema=self.schema, mode="overwrite")
            self._files = self._db.create_table(self._files_name, schema=FILES_SCHEMA, mode="overwrite")
        except Exception as exc:
            raise IndexUnavailable(f"cannot create the index at {self.uri}: {exc}") from exc
        self.files = {}
        self.orphan_paths = set()

    def existing_vectors(self, paths: Iterable[str]) -> dict[str, npt.ArrayLike]:
        """embed_hash -> vector of the rows of `paths`, so unchanged chunks of an edited file are
        not embedded again even without the embedder's cache."""
        found: dict[str, npt.ArrayLike] = {}
        for where in _in_clauses("path", paths):
            table = self.chunks.search().where(where).select(["embed_hash", "vector"]).limit(None).to_arrow()
            found.update(
                zip(table.column("embed_hash").to_pylist(), table.column("vector").to_pylist(), strict=True)
            )
        return found

    def replace(self, drop_paths: set[str], rows: pa.Table, files: dict[str, IndexedFile]) -> None:
        """Drop the rows of `drop_paths`, add `rows`, then write the manifest `files`."""
        try:
            for where in _in_clauses("path", sorted(drop_paths)):
                self.chunks.delete(where)
            if rows.num_rows:
                self.chunks.add(rows)
            self._files.add(
                pa.Table.from_pylist(
                    [{"path": f.path, "file_hash": f.file_hash, "chunks": f.chunks} for f in files.values()],
                    schema=FILES_SCHEMA,
                ),
                mode="overwrite",
            )
            self.files = dict(files)
            self.orphan_paths = set()
            self._maintain_fts()
        except Exception as exc:
            raise IndexUnavailable(f"writing the index at {self.uri} failed: {exc}") from exc

    def _maintain_fts(self) -> None:
        from lancedb.index import FTS

        if self.chunks.count_rows() == 0:
            return
        indices = {i.name: i for i in self.chunks.list_indices()}
        name = FTS_COLUMN + "_idx"
        if name not in indices:
            # Stemming and stop words help prose queries; `simple` splits snake_case at '_' and the
            # `terms` column already holds camelCase parts split (see query.terms_of).
            config = FTS(base_tokenizer="simple", stem=True, remove_stop_words=True, lower_case=True)
            self.chunks.create_index(FTS_COLUMN, config=config, name=name)
        elif self.chunks.index_stats(name).num_unindexed_rows > FTS_BACKLOG_ROWS:  # pyright: ignore[reportOptionalMemberAccess] - the index exists here: it was listed just before
            self.chunks.optimize()

    def version(self) -> int:
        return int(self.chunks.version)


def _in_clauses(column: str, values: Iterable[str], *, batch: int = 200) -> list[str]:
    items = [v.replace("'", "''") for v in values]
    return [
        f"{column} IN (" + ", ".join(f"'{v}'" for v in items[i : i + batch]) + ")"
        for i in range(0, len(items), batch)
    ]
