"""The incremental LanceDB index and hybrid queries on real code: anyio's source, copied to a temporary directory, embedded by the real model."""

import os
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import numpy as np
import pytest

from tool_servers.search.embedding.embed import BUNDLED_MAX_TOKENS, BUNDLED_MODEL, CachedEmbedder
from tool_servers.search.embedding.embed_cache import text_key
from tool_servers.search.errors import IndexLocked, InvalidQuery, RepoNotFound
from tool_servers.search.index.code_index import CodeIndex, open_index
from tool_servers.search.index.lock import hold_index_lock
from tool_servers.search.index.query import parse_query
from tool_servers.search.models import IndexReport

pytestmark = pytest.mark.anyio

CopyCorpus = Callable[..., Path]


def _ids_by_path(index: CodeIndex) -> dict[str, set[str]]:
    rows = index.store.chunks.search().select(["id", "path"]).limit(None).to_list()
    out: dict[str, set[str]] = {}
    for row in rows:
        out.setdefault(row["path"], set()).add(row["id"])
    return out


@pytest.mark.slow  # loads the embedding model
async def test_indexing_real_code_reports_what_it_did_and_finds_code_by_meaning(
    indexed: tuple[CodeIndex, IndexReport],
) -> None:
    """Index and query: the report counts files, chunks, embeddings and skips; a description finds its code."""
    index, report = indexed
    assert report.files == 14 and report.skipped == 1 and report.skipped_files[0].reason == "binary"
    assert report.chunks == index.store.chunks.count_rows() > 100
    assert 0 < report.embedded <= report.chunks and report.messages == []
    status = index.status()
    assert (status.files, status.chunks, status.embedder) == (
        report.files,
        report.chunks,
        f"{BUNDLED_MODEL}@max{BUNDLED_MAX_TOKENS}",
    )
    result = await index.search("open a TCP connection to a remote host and port", k=5)
    assert "_core/_sockets.py" in [h.path for h in result.hits[:3]]
    assert all(h.snippet and h.start_line <= h.end_line for h in result.hits)


@pytest.mark.parametrize(
    ("query", "path", "symbol"),
    [
        ("where is create_tcp_listener defined", "_core/_sockets.py", "create_tcp_listener"),
        ("move_on_after", "_core/_tasks.py", "move_on_after"),
        ("how does `run_sync` pick a thread", "to_thread.py", "run_sync"),
        (
            "MemoryObjectReceiveStream.receive_nowait",
            "streams/memory.py",
            "MemoryObjectReceiveStream.receive_nowait",
        ),
        ("what does TypedAttributeProvider do", "_core/_typedattr.py", "TypedAttributeProvider"),
    ],
)
async def test_a_query_naming_an_identifier_finds_its_definition_first(
    indexed: tuple[CodeIndex, IndexReport], query: str, path: str, symbol: str
) -> None:
    """Identifier boost: the defining chunk outranks every chunk that merely mentions the name."""
    index, _ = indexed
    top = (await index.search(query, k=3)).hits[0]
    assert (top.path, top.symbol) == (path, symbol)


async def test_markdown_sections_are_searchable_with_their_heading_path(
    indexed: tuple[CodeIndex, IndexReport],
) -> None:
    """Documents are chunked by heading; a hit names the section it came from."""
    index, _ = indexed
    top = (await index.search("TCP and UDP helpers", k=3)).hits[0]
    assert (top.path, top.symbol, top.start_line) == ("README.md", "anyio copy > Sockets", 5)


async def test_hits_aggregated_per_file_name_each_file_once(indexed: tuple[CodeIndex, IndexReport]) -> None:
    """Per-file mode returns each file's best chunk once, best file first."""
    index, _ = indexed
    hits = (
        await index.search("statistics: items buffered, open send and receive streams", k=5, per_file=True)
    ).hits
    assert len({h.path for h in hits}) == len(hits) == 5
    assert hits[0].path == "streams/memory.py"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_keyword_and_vector_legs_can_run_alone(indexed: tuple[CodeIndex, IndexReport]) -> None:
    """The evaluation compares each leg with the fusion; each alone still returns ranked hits."""
    index, _ = indexed
    for mode in ("keyword", "vector"):
        hits = (await index.search("cancel scope deadline", k=4, mode=mode)).hits
        assert len(hits) == 4 and hits[0].score >= hits[-1].score


async def test_queries_are_embedded_fresh_and_never_stored_in_the_embedding_cache(
    indexed: tuple[CodeIndex, IndexReport], embedder: CachedEmbedder
) -> None:
    """The shared cache is for chunk texts, which recur across checkouts: a query (chunk search
    or per-file ranking) leaves no row behind, however many distinct queries come."""
    index, _ = indexed
    stored = embedder.cache.count()
    queries = ["wait until a signal arrives, then stop", "run a blocking function in a worker thread"]
    for query in queries:
        assert (await index.search(query, k=3)).hits
        assert (await index.search(query, k=3, per_file=True)).hits
    assert embedder.cache.count() == stored
    keys = [text_key(text) for query in queries for text in (query, parse_query(query).text)]
    assert embedder.cache.get_many(embedder.name, keys) == {}


@pytest.mark.parametrize("query", ["", "   ", "the of and", "how is it"])
async def test_a_query_without_searchable_words_is_refused_with_a_message(
    indexed: tuple[CodeIndex, IndexReport], query: str
) -> None:
    """Bad input gives a clear message (acceptance list), before any search runs."""
    index, _ = indexed
    with pytest.raises(InvalidQuery, match="empty|only common words"):
        await index.search(query)


async def test_find_symbol_returns_definitions_and_references(indexed: tuple[CodeIndex, IndexReport]) -> None:
    """Definitions point at the def line; references are whole-word uses in other lines."""
    index, _ = indexed
    result = await index.find_symbol("get_async_backend")
    (definition,) = result.definitions
    lines = (index.repo / definition.path).read_text().splitlines()
    assert lines[definition.line - 1].lstrip().startswith("def get_async_backend")
    assert len({r.path for r in result.references}) >= 3
    for ref in result.references:
        assert "get_async_backend" in (index.repo / ref.path).read_text().splitlines()[ref.line - 1]
    with pytest.raises(InvalidQuery):
        await index.find_symbol("not a name")


async def test_repo_map_ranks_widely_used_files_first_within_the_budget(
    indexed: tuple[CodeIndex, IndexReport],
) -> None:
    """The map fits the budget, says when it had to leave things out, and leads with used code."""
    index, _ = indexed
    small, large = await index.repo_map(200), await index.repo_map(20_000)
    assert small.tokens <= 200 and small.truncated and small.files
    assert not large.truncated and len(large.files) > len(small.files)
    assert [f.score for f in large.files] == sorted((f.score for f in large.files), reverse=True)
    assert small.files[0].path == large.files[0].path
    assert "get_async_backend" in large.text


async def test_editing_one_file_replaces_only_its_chunks(
    tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """Acceptance: after an edit only that file's rows change, and only its new text is embedded."""
    repo = copy_corpus(tmp_path, ["_core/_tasks.py", "_core/_signals.py", "to_thread.py"])
    index = await open_index(repo, embedder=embedder)
    await index.update()
    before = _ids_by_path(index)
    target = repo / "_core/_signals.py"
    target.write_text(target.read_text() + "\n\ndef frobnicate_signal_quota(limit):\n    return limit * 7\n")

    report = await index.update()

    after = _ids_by_path(index)
    assert (report.changed_files, report.deleted_files, report.embedded) == (1, 0, 1)
    assert {p: ids for p, ids in after.items() if p != "_core/_signals.py"} == {
        p: ids for p, ids in before.items() if p != "_core/_signals.py"
    }
    assert before["_core/_signals.py"] < after["_core/_signals.py"]
    top = (await index.search("frobnicate_signal_quota", k=1)).hits[0]
    assert (top.path, top.symbol) == ("_core/_signals.py", "frobnicate_signal_quota")
    assert (await index.update()).embedded == 0


async def test_deleting_a_file_removes_its_hits(
    tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """Acceptance: a deleted file's chunks are dropped, so it never shows up in results again."""
    repo = copy_corpus(tmp_path, ["_core/_tasks.py", "_core/_signals.py", "to_thread.py"])
    index = await open_index(repo, embedder=embedder)
    await index.update()
    assert (await index.search("open_signal_receiver", k=1)).hits[0].path == "_core/_signals.py"
    (repo / "_core/_signals.py").unlink()

    report = await index.update()

    assert (report.deleted_files, report.files) == (1, 2)
    hits = (await index.search("open_signal_receiver signals", k=20)).hits
    assert hits and "_core/_signals.py" not in {h.path for h in hits}
    assert "_core/_signals.py" not in _ids_by_path(index)


async def test_two_indexers_of_one_repository_at_once_leave_a_consistent_index(
    tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """The lock makes them take turns: no duplicate rows, and the second finds nothing to do."""
    repo = copy_corpus(tmp_path, ["_core/_tasks.py", "to_thread.py"])
    first, second = await open_index(repo, embedder=embedder), await open_index(repo, embedder=embedder)
    reports: list[IndexReport] = []

    async def run(index: CodeIndex) -> None:
        reports.append(await index.update())

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, first)
            tg.start_soon(run, second)

    assert sorted(r.changed_files for r in reports) == [0, 2]
    ids = first.store.chunks.search().select(["id"]).limit(None).to_list()
    assert len(ids) == len({r["id"] for r in ids}) == reports[0].chunks == reports[1].chunks


async def test_a_corrupt_index_is_rebuilt_with_a_message(
    tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """Acceptance: damaged data files are detected on open and the index is rebuilt, not crashed on."""
    repo = copy_corpus(tmp_path, ["_core/_signals.py", "to_thread.py"])
    index = await open_index(repo, embedder=embedder)
    chunks = (await index.update()).chunks
    for data in (repo / ".codeloop/index/chunks.lance/data").iterdir():
        data.write_bytes(b"not a lance file")

    reopened = await open_index(repo, embedder=embedder)
    report = await reopened.update()

    assert any("unreadable" in m and "rebuilding" in m for m in report.messages)
    assert report.chunks == chunks and report.changed_files == 2
    assert (await reopened.search("run_sync", k=1)).hits[0].path == "to_thread.py"


# Runs in a child process, so the limit binds there only: as root (the tests' user) no chmod
# makes a directory unreadable, but a process limit is enforced on root as on anyone.
_STORE_UNDER_A_LIMIT = """
import resource, signal, sys
from tool_servers.search.errors import IndexUnavailable
from tool_servers.search.index.store import Store

limit, uri, table, embedder, dimension = sys.argv[1:]
try:
    if limit == "file_size":  # every write fails with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
        Store(uri, table, embedder=embedder, dimension=int(dimension))
    else:  # out of file descriptors (EMFILE) when an update re-reads the manifest
        store = Store(uri, table, embedder=embedder, dimension=int(dimension))
        resource.setrlimit(resource.RLIMIT_NOFILE, (3, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        store.load()
except IndexUnavailable as exc:
    print(exc)
    sys.exit(3)
"""


@pytest.mark.parametrize(
    ("limit", "cause"), [("open_files", "Too many open files"), ("file_size", "too large")]
)
@pytest.mark.slow
async def test_storage_that_fails_leaves_the_index_as_it_is(
    limit: str, cause: str, tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """Acceptance: a disk that refuses writes or a process out of file descriptors is not damage.
    The open fails saying why and the index is kept; it used to be dropped and rebuilt (and, the
    disk still full, lost)."""
    repo = copy_corpus(tmp_path, ["_core/_signals.py", "to_thread.py"])
    index = await open_index(repo, embedder=embedder)
    chunks = (await index.update()).chunks
    # As a crash before the full-text index was built leaves it: the next open builds it (a write).
    index.store.chunks.drop_index("terms_idx")
    store = index.store
    args = [limit, store.uri, store.name, embedder.name, str(embedder.dimension)]
    with anyio.fail_after(120):
        child = await anyio.run_process([sys.executable, "-c", _STORE_UNDER_A_LIMIT, *args], check=False)
    said = child.stdout.decode()

    assert child.returncode == 3, said + child.stderr.decode()
    assert cause in said and "left as it is" in said
    report = await (await open_index(repo, embedder=embedder)).update()
    assert not any("rebuilding" in m for m in report.messages)
    assert (report.chunks, report.changed_files) == (chunks, 0)


async def test_a_data_file_gone_missing_is_damage_and_is_rebuilt(
    tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """A table whose manifest names a data file that is not there cannot be read again: rebuilt."""
    repo = copy_corpus(tmp_path, ["to_thread.py"])
    index = await open_index(repo, embedder=embedder)
    chunks = (await index.update()).chunks
    for data in (repo / ".codeloop/index/chunks.lance/data").iterdir():
        data.unlink()

    report = await (await open_index(repo, embedder=embedder)).update()

    assert any("unreadable" in m and "rebuilding" in m for m in report.messages)
    assert (report.chunks, report.changed_files) == (chunks, 1)


class _RenamedEmbedder:
    """The real model under another name: stands for "the index was built with a different model"
    without loading a second model, which the machine cannot afford in a test."""

    def __init__(self, inner: CachedEmbedder, name: str) -> None:
        self.inner, self.name, self.dimension = inner, name, inner.dimension

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed(texts)


async def test_an_index_built_with_another_model_is_rebuilt_with_a_message(
    tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """Vectors of two models are not comparable: a model change means a rebuild, said out loud."""
    repo = copy_corpus(tmp_path, ["to_thread.py"])
    await (await open_index(repo, embedder=_RenamedEmbedder(embedder, "old-model"))).update()

    report = await (await open_index(repo, embedder=embedder)).update()

    assert any("old-model" in m and "rebuilding" in m for m in report.messages)
    assert report.changed_files == 1 and report.chunks > 0


async def test_the_index_can_live_in_another_directory_or_at_a_lancedb_uri(
    tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """`index_dir` takes a directory (the repository stays untouched) or any LanceDB URI."""
    repo = copy_corpus(tmp_path / "repo", ["to_thread.py"])
    index = await open_index(repo, index_dir=tmp_path / "indexes", embedder=embedder)
    await index.update()
    assert not (repo / ".codeloop").exists()
    assert any(p.suffix == ".lance" for p in (tmp_path / "indexes").iterdir())
    assert (await index.search("run_sync", k=1)).hits[0].symbol == "run_sync"

    at_uri = await open_index(repo, index_dir=f"file://{tmp_path}/by-uri", embedder=embedder)
    assert (await at_uri.update()).chunks == index.status().chunks
    assert at_uri.status().index.startswith("file://") and any((tmp_path / "by-uri").iterdir())
    assert (await at_uri.search("run_sync", k=1)).hits[0].symbol == "run_sync"


async def test_bad_repositories_get_clear_messages(tmp_path: Path, embedder: CachedEmbedder) -> None:
    """Acceptance: a missing dir, a file, an empty repo and undecodable files are explained, not crashed on."""
    with pytest.raises(RepoNotFound, match="does not exist"):
        await open_index(tmp_path / "missing", embedder=embedder)
    (tmp_path / "file.py").write_text("x = 1\n")
    with pytest.raises(RepoNotFound, match="not a directory"):
        await open_index(tmp_path / "file.py", embedder=embedder)
    empty = tmp_path / "empty"
    (empty / "bin").mkdir(parents=True)
    (empty / "bin" / "tool").write_bytes(b"\x7fELF\x00\x01")
    (empty / "notes.txt").write_bytes("caf\u00e9 cr\u00e8me".encode("latin-1"))
    report = await (await open_index(empty, embedder=embedder)).update()
    assert (report.files, report.chunks, report.skipped) == (0, 0, 2)
    reasons = {s.path: s.reason for s in report.skipped_files}
    assert reasons["bin/tool"] == "binary" and reasons["notes.txt"].startswith("not UTF-8 text")
    assert any("no indexable files" in m for m in report.messages)
    index = await open_index(empty, embedder=embedder)
    assert (await index.search("anything at all")).hits == []


async def test_an_indexer_kept_waiting_too_long_fails_naming_the_lock_holder(
    tmp_path: Path, embedder: CachedEmbedder, copy_corpus: CopyCorpus
) -> None:
    """Our choice: waiting for another indexer is bounded, and the error says which process holds it."""
    repo = copy_corpus(tmp_path, ["to_thread.py"])
    index = await open_index(repo, embedder=embedder, lock_timeout_s=0.2)
    async with hold_index_lock(repo / ".codeloop/index/chunks.lock"):
        with pytest.raises(IndexLocked, match=f"pid {os.getpid()}"):
            await index.update()
    assert (await index.update()).files == 1
