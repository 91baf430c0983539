"""A content-addressed store of embedding vectors, shared by every checkout on the machine.

Key: (model name, sha256 of the exact text embedded); value: the float32 vector. Nothing in the
key names a repository, a path or a commit, so a second worktree, branch or commit of the same
repository finds every unchanged chunk already embedded, and only chunks whose text differs reach
the model.

Storage is one SQLite file in WAL mode: readers never block the writer, concurrent writers wait
on `busy_timeout`, and rows are inserted with `INSERT OR IGNORE`, so two indexers that embed the
same text at once both succeed and keep one row (the vectors are equal anyway). SQLite rather than
LanceDB because lookups are point reads by key in batches of a few hundred, which SQLite answers
in well under a millisecond per batch without an index build, and its locking is proven across
processes.
"""

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import platformdirs

from tool_servers.search.errors import SearchError

EMBEDDINGS_DIR = "embeddings"
"""The embedding cache's directory under codeloop's cache root (converted models go in `openvino/`)."""

_DB_NAME = "embeddings.sqlite3"
# SQLite's default limit on host parameters is 32766 on current builds but 999 on old ones.
_KEYS_PER_QUERY = 900
_BUSY_TIMEOUT_MS = 60_000
_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_sha256)
) WITHOUT ROWID
"""


class EmbeddingCacheError(SearchError):
    """The embedding cache could not be opened, read or written (permissions, full disk, corruption)."""


def default_cache_root() -> Path:
    """The platform's user cache directory for codeloop (`~/.cache/codeloop` on Linux, following
    XDG_CACHE_HOME, as platformdirs decides): where the cache lives when the caller names none.
    The composition root passes `CODELOOP_CACHE_DIR` down instead when it is set (`codeloop.config`)."""
    return platformdirs.user_cache_path("codeloop", appauthor=False)


def default_cache_dir(root: Path | None = None) -> Path:
    """The embedding cache's directory: `embeddings/` under `root` (default `default_cache_root()`)."""
    return (root if root is not None else default_cache_root()) / EMBEDDINGS_DIR


def text_key(text: str) -> str:
    """The cache key of a text: hex sha256 of its UTF-8 bytes (surrogates escaped, never raising)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    """Vectors by (model, text hash) in `<directory>/embeddings.sqlite3`; safe across threads and processes.

    Raises:
        EmbeddingCacheError: from the constructor and every method when SQLite fails.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / _DB_NAME
        # One connection shared by the threads of this process; SQLite serialises the processes.
        self._lock = threading.Lock()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_MS / 1000, check_same_thread=False, isolation_level=None
            )
            self._db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            _use_wal(self._db)
            # NORMAL in WAL mode may lose the last commits on power loss but never corrupts: a lost
            # vector is merely recomputed.
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise EmbeddingCacheError(
                f"cannot open the embedding cache at {self.path}: {exc}; "
                "if the file is damaged, delete the file to start an empty cache"
            ) from exc

    def get_many(self, model: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors among `keys` (text hashes) for `model`; missing keys are absent."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, np.ndarray] = {}
        with self._lock, _sqlite_errors(self.path, "read"):
            for start in range(0, len(wanted), _KEYS_PER_QUERY):
                part = wanted[start : start + _KEYS_PER_QUERY]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT text_sha256, dim, vector FROM vectors WHERE model = ? AND text_sha256 IN ({marks})",
                    (model, *part),
                )
                for key, dim, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (dim,):
                        found[key] = vector
        return found

    def put_many(self, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Store `vectors` (text hash -> 1-D float32) for `model`; existing keys are kept as they are."""
        rows = [
            (model, key, int(vec.shape[0]), np.ascontiguousarray(vec, dtype=np.float32).tobytes())
            for key, vec in vectors.items()
        ]
        if not rows:
            return
        with self._lock, _sqlite_errors(self.path, "write"):
            # One transaction: a crash leaves all or none of the batch, and one fsync covers it.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR IGNORE INTO vectors (model, text_sha256, dim, vector) VALUES (?, ?, ?, ?)",
                    rows,
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def count(self, model: str | None = None) -> int:
        """Rows stored, for one model or all."""
        with self._lock, _sqlite_errors(self.path, "read"):
            if model is None:
                (n,) = self._db.execute("SELECT count(*) FROM vectors").fetchone()
            else:
                (n,) = self._db.execute("SELECT count(*) FROM vectors WHERE model = ?", (model,)).fetchone()
        return int(n)

    def close(self) -> None:
        """Close the connection; later calls fail."""
        with self._lock:
            self._db.close()


def _use_wal(db: sqlite3.Connection) -> None:
    """Switch the file to WAL mode, which persists in the file, so only its first opener does it.

    SQLite answers the switch with "database is locked" at once, without its busy handler, while
    another connection is opening the same new file (seen with two indexers starting together),
    so the switch is retried here until the busy timeout.
    """
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    delay_s = 0.01
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay_s)
        delay_s = min(delay_s * 2, 0.5)


@contextmanager
def _sqlite_errors(path: Path, operation: str) -> Iterator[None]:
    """Translate sqlite3 errors into EmbeddingCacheError naming the file and the operation."""
    try:
        yield
    except sqlite3.Error as exc:
        raise EmbeddingCacheError(
            f"embedding cache {operation} failed at {path}: {exc}; "
            "if the file is damaged, delete the file to start an empty cache"
        ) from exc
