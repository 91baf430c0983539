"""`CodeIndex`: one repository's incremental index, and `open_index` to get one.

An update takes the index lock, re-reads the manifest (another indexer may have written since),
walks the repository, and re-chunks only files whose content hash changed. Vectors of chunks whose
embedding text is unchanged are copied from the old rows, the rest go to the embedder (whose own
content-addressed cache serves other checkouts of the same code), then the rows of changed and
deleted files are replaced and the manifest written. Everything blocking runs in worker threads.
"""

import dataclasses
import functools
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from layout import TREE_DIR, TREE_INDEX
from tool_servers.search.embedding.embed import Embedder, load_embedder
from tool_servers.search.errors import IndexDirUnusable, IndexUnavailable, InvalidQuery, RepoNotFound
from tool_servers.search.index import filerank
from tool_servers.search.index import query as q
from tool_servers.search.index.chunks import Chunk, chunk_file
from tool_servers.search.index.files import DEFAULT_MAX_FILE_BYTES, Skipped, SourceFile, walk_repo
from tool_servers.search.index.lock import hold_index_lock
from tool_servers.search.index.query_parts import code_shaped, decompose, keyword_terms
from tool_servers.search.index.rows import ChunkRow
from tool_servers.search.index.store import SCHEMA_VERSION, IndexedFile, Store
from tool_servers.search.index.vectors import VectorMatrix, texts_by_id
from tool_servers.search.models import (
    IndexReport,
    IndexStatus,
    RepoMap,
    SearchHit,
    SearchResult,
    SkippedFile,
    SymbolResult,
)
from tool_servers.secret_files import DEFAULT_RULES, SecretRules

if TYPE_CHECKING:
    from tool_servers.search.index.symbols import Outline

DEFAULT_INDEX_DIR = Path(TREE_INDEX)
EMBED_BATCH = 256  # per embed() call: the embedder sorts by length within a call, so bigger pads less
MAX_LISTED_SKIPS = 200
# File ranking's candidate depth: ~10 chunks per file of the 50 files a caller may ask for; the
# vector legs are per piece, so each can be shallower.
FILE_KEYWORD_LIMIT = 500
FILE_VECTOR_LIMIT = 200

Progress = Callable[[str, int, int], None]
"""Called as `progress(stage, done, total)`; stages: `scan`, `embed`, `write`."""


async def open_index(
    repo: Path | str,
    *,
    index_dir: Path | str | None = None,
    embedder: Embedder | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    lock_timeout_s: float = 900.0,
    secrets: SecretRules = DEFAULT_RULES,
    cache_root: Path | None = None,
) -> "CodeIndex":
    """Open (creating if needed) the index of `repo`. `index_dir` is a directory or a LanceDB URI;
    by default `<repo>/.codeloop/index`. Without `embedder`, the bundled model is loaded, with its
    caches under `cache_root` (default: the platform's cache directory, `embed_cache`).
    `lock_timeout_s` bounds the wait for another indexer of the same index. Files `secrets`
    names are never read.

    Raises:
        RepoNotFound: `repo` is not an existing directory.
        IndexLocked: another indexer held the lock for `lock_timeout_s`.
        IndexDirUnusable: no index can be kept at `index_dir` (a file, /proc, read-only).
        IndexUnavailable: the index storage cannot be opened or created.
    """
    root = check_repo(repo)
    if embedder is None:
        embedder = await anyio.to_thread.run_sync(functools.partial(load_embedder, cache_root=cache_root))
    with _unusable(root, index_dir):
        uri, table, lock_path = _location(root, index_dir)
        async with hold_index_lock(lock_path, timeout_s=lock_timeout_s):
            store = await anyio.to_thread.run_sync(
                lambda: Store(uri, table, embedder=embedder.name, dimension=embedder.dimension)
            )
    return CodeIndex(
        root,
        store,
        embedder,
        lock_path,
        max_file_bytes=max_file_bytes,
        lock_timeout_s=lock_timeout_s,
        secrets=secrets,
    )


def check_repo(repo: Path | str) -> Path:
    """The resolved repository directory.

    Raises:
        RepoNotFound: it does not exist or is a file.
    """
    root = Path(repo).expanduser()
    if not root.exists():
        raise RepoNotFound(f"repository {str(repo)!r} does not exist: pass the path of a directory with code")
    if not root.is_dir():
        raise RepoNotFound(
            f"repository {str(repo)!r} is a file, not a directory: pass the directory that holds it"
        )
    return root.resolve()


def check_index_dir(repo: Path, index_dir: Path | str | None) -> None:
    """Make the index's directory and lock file at `index_dir` (the repository's own when None), as
    `open_index` would: a caller about to load the embedding model learns first that no index can
    be kept there, not ten seconds later.

    Raises:
        IndexDirUnusable: a file where a directory must be, /proc, a read-only disk.
    """
    with _unusable(repo, index_dir):
        _, _, lock_path = _location(repo, index_dir)
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644))  # as `hold_index_lock` opens it


@contextmanager
def _unusable(root: Path, index_dir: Path | str | None) -> Iterator[None]:
    """An `OSError` of making the index's place, as `IndexDirUnusable` naming the path and the fix."""
    try:
        yield
    except OSError as exc:
        where = exc.filename or index_dir or root / DEFAULT_INDEX_DIR
        why = exc.strerror or str(exc)
        if isinstance(exc, (FileExistsError, NotADirectoryError)):
            why = "a file is where a directory must be"
        raise IndexDirUnusable(
            f"cannot keep the index at {where}: {why}; pass --index-dir DIR, a writable directory"
        ) from exc


def _location(root: Path, index_dir: Path | str | None) -> tuple[str, str, Path]:
    """(LanceDB URI, table name, lock file) for a repository."""
    if index_dir is None:
        directory = root / DEFAULT_INDEX_DIR
        directory.mkdir(parents=True, exist_ok=True)
        ignore = directory.parent / ".gitignore"
        if not ignore.exists():  # keep the index out of `git status` and commits
            ignore.write_text("*\n")
        return str(directory), "chunks", directory / "chunks.lock"
    # A shared location may hold several repositories: name the table after this one.
    slug = re.sub(r"[^A-Za-z0-9]+", "_", root.name).strip("_")[:40] or "repo"
    table = f"{slug}_{hashlib.sha256(str(root).encode()).hexdigest()[:8]}"
    if "://" in str(index_dir):
        return str(index_dir), table, root / TREE_DIR / f"{table}.lock"
    directory = Path(index_dir).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    return str(directory), table, directory / f"{table}.lock"


def embed_text(chunk: Chunk) -> str:
    """What the model reads: path and qualified name give context the code alone lacks."""
    head = f"{chunk.path} {chunk.symbol}" if chunk.symbol else chunk.path
    return f"{head}\n{chunk.text}"


class CodeIndex:
    """The index of one repository. Create with `open_index`."""

    def __init__(
        self,
        repo: Path,
        store: Store,
        embedder: Embedder,
        lock_path: Path,
        *,
        max_file_bytes: int,
        lock_timeout_s: float,
        secrets: SecretRules = DEFAULT_RULES,
    ) -> None:
        self.repo = repo
        self._secrets = secrets
        self.embedder = embedder
        self._store = store
        self._lock_path = lock_path
        self._max_file_bytes = max_file_bytes
        self._lock_timeout_s = lock_timeout_s
        self._symbols_cache: tuple[int, Outline] | None = None
        self._vectors: tuple[int, VectorMatrix] | None = None

    @property
    def store(self) -> Store:
        return self._store

    def status(self) -> IndexStatus:
        """The index as this process last saw it (no storage access)."""
        return IndexStatus(
            repo=str(self.repo),
            index=self._store.uri,
            table=self._store.name,
            embedder=self.embedder.name,
            schema_version=SCHEMA_VERSION,
            files=len(self._store.files),
            chunks=sum(f.chunks for f in self._store.files.values()),
            version=self._store.version(),
        )

    async def update(self, *, progress: Progress | None = None) -> IndexReport:
        """Bring the index in line with the files on disk.

        Raises:
            IndexLocked: another indexer held the lock too long.
            IndexUnavailable: the storage failed in a way a rebuild cannot fix.
        """
        started = time.perf_counter()
        report = _Tally()
        async with hold_index_lock(self._lock_path, timeout_s=self._lock_timeout_s):
            await anyio.to_thread.run_sync(self._store.load)
            if self._store.rebuilt_reason:
                report.messages.append(f"{self._store.rebuilt_reason}; rebuilding it from scratch")
                self._store.rebuilt_reason = None
            sources, skipped = await anyio.to_thread.run_sync(self._scan)
            if progress:
                progress("scan", len(sources), len(sources))
            old, orphans = self._store.files, self._store.orphan_paths
            changed = [
                s
                for p, s in sources.items()
                if p in orphans or p not in old or old[p].file_hash != s.file_hash
            ]
            gone = (set(old) | orphans) - set(sources)
            chunks = await anyio.to_thread.run_sync(
                lambda: {s.path: chunk_file(s.path, s.text) for s in changed}
            )
            if changed or gone:
                rows, report.embedded = await self._rows(chunks, sources, progress)
                files = {p: old[p] for p in sources if p in old and p not in chunks}
                files |= {p: IndexedFile(p, sources[p].file_hash, len(c)) for p, c in chunks.items()}
                if progress:
                    progress("write", 0, 1)
                drop = {s.path for s in changed if s.path in old or s.path in orphans} | gone
                await anyio.to_thread.run_sync(lambda: self._store.replace(drop, rows, files))
                if progress:
                    progress("write", 1, 1)
        if not sources:
            report.messages.append(
                f"no indexable files in {self.repo} ({len(skipped)} skipped): "
                "the index is empty; point at a directory with source or text files"
            )
        status = self.status()
        return IndexReport(
            repo=str(self.repo),
            index=self._store.uri,
            files=status.files,
            chunks=status.chunks,
            embedded=report.embedded,
            skipped=len(skipped),
            changed_files=len(changed),
            deleted_files=len(gone),
            seconds=round(time.perf_counter() - started, 3),
            skipped_files=[SkippedFile(path=s.path, reason=s.reason) for s in skipped[:MAX_LISTED_SKIPS]],
            messages=report.messages,
        )

    def _scan(self) -> tuple[dict[str, SourceFile], list[Skipped]]:
        sources: dict[str, SourceFile] = {}
        skipped = []
        for item in walk_repo(self.repo, max_file_bytes=self._max_file_bytes, secrets=self._secrets):
            if isinstance(item, SourceFile):
                sources[item.path] = item
            else:
                skipped.append(item)
        return sources, skipped

    async def _rows(
        self, chunks: dict[str, list[Chunk]], sources: dict[str, SourceFile], progress: Progress | None
    ) -> tuple[pa.Table, int]:
        """Rows for the new chunks, and how many texts went to the embedder."""
        all_chunks = [c for cs in chunks.values() for c in cs]
        texts = [embed_text(c) for c in all_chunks]
        hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        vectors = await anyio.to_thread.run_sync(self._store.existing_vectors, list(chunks))
        todo = list(dict.fromkeys(h for h in hashes if h not in vectors))  # identical texts embed once
        text_of = dict(zip(hashes, texts, strict=True))
        for start in range(0, len(todo), EMBED_BATCH):
            if progress:
                progress("embed", start, len(todo))
            batch = todo[start : start + EMBED_BATCH]
            embedded = await anyio.to_thread.run_sync(self.embedder.embed, [text_of[h] for h in batch])
            vectors.update(zip(batch, np.asarray(embedded, dtype=np.float32), strict=True))
        if progress:
            progress("embed", len(todo), len(todo))
        table = await anyio.to_thread.run_sync(lambda: self._arrow(all_chunks, hashes, vectors, sources))
        return table, len(todo)

    def _arrow(
        self,
        chunks: list[Chunk],
        hashes: list[str],
        vectors: dict[str, npt.ArrayLike],
        sources: dict[str, SourceFile],
    ) -> pa.Table:
        schema = self._store.schema
        dim = self.embedder.dimension
        flat = (
            np.concatenate([np.asarray(vectors[h], dtype=np.float32).reshape(dim) for h in hashes])
            if hashes
            else []
        )
        columns = {
            "id": [_row_id(c) for c in chunks],
            "path": [c.path for c in chunks],
            "start_line": [c.start_line for c in chunks],
            "end_line": [c.end_line for c in chunks],
            "symbol": [c.symbol for c in chunks],
            "name": [n.lower() if (n := c.name) else None for c in chunks],
            "kind": [c.kind for c in chunks],
            "signature": [c.signature for c in chunks],
            "text": [c.text for c in chunks],
            "terms": [q.terms_of(c) for c in chunks],
            "content_hash": [c.content_hash for c in chunks],
            "embed_hash": hashes,
            "file_hash": [sources[c.path].file_hash for c in chunks],
        }
        arrays = [pa.array(v, type=schema.field(k).type) for k, v in columns.items()]
        arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim))
        return pa.Table.from_arrays(arrays, schema=schema)

    async def search(
        self,
        query: str,
        *,
        k: int = 10,
        per_file: bool = False,
        mode: q.SearchMode = "hybrid",
        keep_tests: bool = False,
        executed: dict[str, int] | None = None,
        raised: Sequence[Sequence[str]] = (),
    ) -> SearchResult:
        """Best chunks (or, with `per_file`, best files) for `query`.

        `per_file` ranks files from all the evidence of `filerank` (the query taken apart into
        paths, frames, identifiers and embedding pieces); test files rank after source files
        unless `keep_tests`. `executed`: the files the query's examples ran (path -> functions,
        `examples.run.trace_examples`), which fill ranks of the file ranking; `raised`: for each
        exception they raised in the repository, its traceback's files, innermost first. `mode` "vector" or "keyword" runs one chunk leg alone, without
        boosts (for evaluation).

        Raises:
            InvalidQuery: empty query, only stop words, or k < 1.
            IndexUnavailable: the index could not be read.
        """
        if k < 1:
            raise InvalidQuery(f"k must be at least 1, got {k}")
        parsed = q.parse_query(query)
        table = self._store.chunks
        if await anyio.to_thread.run_sync(table.count_rows) == 0:
            return SearchResult(query=query, hits=[])
        if per_file and mode == "hybrid":
            evidence = await self.file_evidence(query, parsed=parsed)
            evidence.executed = dict(executed or {})
            evidence.raised = [list(frames) for frames in raised]
            ranked = filerank.rank_files(evidence, keep_tests=keep_tests)[:k]
            missing = [f.best["id"] for f in ranked if f.best is not None and "text" not in f.best]
            texts = await anyio.to_thread.run_sync(lambda: texts_by_id(table, missing))
            return SearchResult(query=query, hits=[_file_hit(f, texts) for f in ranked])
        limit = max(50, k * (10 if per_file else 5))
        legs: dict[str, list[ChunkRow]] = {}

        async def run(name: str, fn: Callable[[], list[ChunkRow]]) -> None:
            legs[name] = await anyio.to_thread.run_sync(fn)

        def vector() -> list[ChunkRow]:
            vec = self.embed_queries([parsed.text])[0]
            return q.vector_leg(table, vec, limit=limit)

        try:
            async with anyio.create_task_group() as tg:
                if mode != "keyword":
                    tg.start_soon(run, "vector", vector)
                if mode != "vector":
                    tg.start_soon(run, "keyword", lambda: q.keyword_leg(table, parsed, limit=limit))
                if mode == "hybrid":
                    tg.start_soon(run, "named", lambda: q.name_leg(table, parsed))
        except* (ValueError, RuntimeError, OSError) as group:
            raise IndexUnavailable(
                f"searching the index at {self._store.uri} failed: {group.exceptions[0]}"
            ) from group
        weights = {"vector": q.VECTOR_WEIGHT, "keyword": q.KEYWORD_WEIGHT}
        rankings = [(weights[name], legs[name]) for name in ("vector", "keyword") if name in legs]
        hits = q.fuse(
            parsed, rankings, legs.get("named", []), k=k, per_file=per_file, boosts=mode == "hybrid"
        )
        return SearchResult(query=query, hits=hits)

    def indexed_paths(self) -> list[str]:
        """The files the index holds, relative to the repository, sorted."""
        return sorted(self._store.files)

    def _vector_matrix(self) -> VectorMatrix:
        """The chunk vectors of the current index version (read once per version)."""
        version = self._store.version()
        if self._vectors is None or self._vectors[0] != version:
            self._vectors = (version, VectorMatrix(self._store.chunks, dimension=self.embedder.dimension))
        return self._vectors[1]

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors, computed fresh: the shared embedding cache is for chunk texts, which
        recur across checkouts; queries rarely recur, and caching each would grow it forever.
        An embedder with a cache in front names the model behind it `inner` (`CachedEmbedder`
        and the composition root's shared embedder do)."""
        inner = getattr(self.embedder, "inner", self.embedder)
        return np.asarray(inner.embed(texts), dtype=np.float32)

    async def file_evidence(self, query: str, *, parsed: q.ParsedQuery | None = None) -> filerank.Evidence:
        """Everything `filerank.rank_files` needs for `query`: the keyword leg over chunks, one
        vector search per embedding piece, the definitions of the names the query uses, and the
        imports of the files those name. `parsed`: `query` already parsed (a long issue takes
        tens of milliseconds to parse).

        Raises:
            InvalidQuery: empty query or only stop words.
            IndexUnavailable: the index could not be read.
        """
        parsed = parsed or q.parse_query(query)
        issue = decompose(query)
        table = self._store.chunks
        evidence = filerank.Evidence(issue=issue, paths=sorted(self._store.files))
        names = sorted({i.rsplit(".", 1)[-1].lower() for i in issue.identifiers})

        def vectors() -> None:
            pieces = issue.pieces or [parsed.text]
            embedded = self.embed_queries(pieces)
            evidence.vector = self._vector_matrix().nearest(embedded, limit=FILE_VECTOR_LIMIT)

        def keyword() -> None:
            capped = dataclasses.replace(parsed, fts_text=keyword_terms(issue) or parsed.fts_text)
            evidence.keyword = q.keyword_leg(table, capped, limit=FILE_KEYWORD_LIMIT)

        def title_keyword() -> None:
            focus = " ".join([issue.title, *(i for i in issue.identifiers if code_shaped(i))])
            try:
                focused = q.parse_query(focus)
            except InvalidQuery:
                return
            evidence.title_keyword = q.keyword_leg(table, focused, limit=FILE_KEYWORD_LIMIT)

        def definitions() -> None:
            evidence.definitions = q.definition_leg(table, names)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, vectors)
                tg.start_soon(anyio.to_thread.run_sync, keyword)
                tg.start_soon(anyio.to_thread.run_sync, title_keyword)
                tg.start_soon(anyio.to_thread.run_sync, definitions)
        except* (ValueError, RuntimeError, OSError) as group:
            raise IndexUnavailable(
                f"searching the index at {self._store.uri} failed: {group.exceptions[0]}"
            ) from group
        if filerank.NEIGHBOUR_SHARE:
            top = filerank.rank_files(evidence)[: filerank.NEIGHBOUR_TOP]
            try:
                evidence.imports = await anyio.to_thread.run_sync(
                    lambda: q.imports_leg(table, [f.path for f in top], set(evidence.paths))
                )
            except (ValueError, RuntimeError, OSError) as exc:
                raise IndexUnavailable(f"searching the index at {self._store.uri} failed: {exc}") from exc
        return evidence

    async def find_symbol(self, name: str, *, limit: int = 100) -> SymbolResult:
        """Definitions of `name` (bare or dotted) and lines that use it.

        Raises:
            InvalidQuery: `name` is not an identifier.
        """
        from tool_servers.search.index import symbols

        return await anyio.to_thread.run_sync(
            lambda: symbols.find_symbol(self._store.chunks, name, limit=limit)
        )

    async def repo_map(self, token_budget: int = 1024) -> RepoMap:
        """Per-file outlines of top-level symbols, most referenced first, within `token_budget`."""
        from tool_servers.search.index import symbols

        version = self._store.version()
        if self._symbols_cache is None or self._symbols_cache[0] != version:
            table = await anyio.to_thread.run_sync(symbols.load_outline, self._store.chunks)
            self._symbols_cache = (version, table)
        outline = self._symbols_cache[1]
        return await anyio.to_thread.run_sync(lambda: symbols.render_repo_map(outline, token_budget))


class _Tally:
    def __init__(self) -> None:
        self.embedded = 0
        self.messages: list[str] = []


def _row_id(chunk: Chunk) -> str:
    key = f"{chunk.path}\0{chunk.start_line}\0{chunk.end_line}\0{chunk.content_hash}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _file_hit(ranked: filerank.RankedFile, texts: dict[str, str]) -> SearchHit:
    row = ranked.best
    if row is None:  # found by name only: point at the file's top
        return SearchHit(
            path=ranked.path, start_line=1, end_line=1, symbol=None, score=round(ranked.score, 6), snippet=""
        )
    return SearchHit(
        path=row["path"],
        start_line=row["start_line"],
        end_line=row["end_line"],
        symbol=row["symbol"],
        score=round(ranked.score, 6),
        snippet=row["text"] if "text" in row else texts.get(row["id"], ""),
    )
