"""The content-addressed embedding cache: hits skip the model, duplicates embed once, processes share it."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from codeloop.config.environment import tool_server_config
from tool_servers.search.embedding.embed import CachedEmbedder, Embedder
from tool_servers.search.embedding.embed_cache import (
    EmbeddingCache,
    EmbeddingCacheError,
    default_cache_dir,
    text_key,
)


class CountingEmbedder:
    """Passes texts to a real embedder and records every text that reached it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.seen: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def counting(fast_model) -> CountingEmbedder:
    return CountingEmbedder(fast_model)


def test_second_embedding_of_same_texts_is_answered_by_the_cache(tmp_path, counting, code_chunks) -> None:
    """A cache hit does not run the model and returns the vectors stored the first time."""
    embedder = CachedEmbedder(counting, EmbeddingCache(tmp_path))
    first = embedder.embed(code_chunks[:8])
    assert len(counting.seen) == 8
    second = embedder.embed(code_chunks[:8])
    assert len(counting.seen) == 8
    np.testing.assert_array_equal(first, second)
    assert (embedder.hits, embedder.misses) == (8, 8)


def test_only_texts_not_seen_before_reach_the_model(tmp_path, counting, code_chunks) -> None:
    """Another checkout embeds only chunks whose text differs from what is cached."""
    embedder = CachedEmbedder(counting, EmbeddingCache(tmp_path))
    embedder.embed(code_chunks[:6])
    edited = code_chunks[2] + "\n    # edited"
    vectors = embedder.embed([*code_chunks[:6], edited])
    assert counting.seen[6:] == [edited]
    assert vectors.shape == (7, 384)


def test_identical_texts_in_one_call_are_embedded_once(tmp_path, counting, code_chunks) -> None:
    """Identical chunks are embedded once and every copy gets the same vector."""
    embedder = CachedEmbedder(counting, EmbeddingCache(tmp_path))
    a, b = code_chunks[0], code_chunks[1]
    vectors = embedder.embed([a, b, a, a, b])
    assert sorted(counting.seen) == sorted([a, b])
    np.testing.assert_array_equal(vectors[0], vectors[2])
    np.testing.assert_array_equal(vectors[1], vectors[4])
    assert not np.array_equal(vectors[0], vectors[1])


def test_cache_is_keyed_by_model_name(tmp_path, fast_model, code_chunks) -> None:
    """Our contract: the model name is part of the key, so another model never reads these vectors."""
    cache = EmbeddingCache(tmp_path)
    CachedEmbedder(fast_model, cache).embed(code_chunks[:3])
    keys = [text_key(t) for t in code_chunks[:3]]
    assert len(cache.get_many(fast_model.name, keys)) == 3
    assert cache.get_many("another-model", keys) == {}


_READER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from tool_servers.search.embedding.embed import CachedEmbedder
    from codeloop.config.environment import tool_server_config
    from tool_servers.search.embedding.embed_cache import EmbeddingCache, default_cache_dir

    class RefusingEmbedder:
        name, dimension = sys.argv[1], 384
        def embed(self, texts):
            raise AssertionError(f"cache miss for {len(texts)} texts")

    texts = json.loads(sys.stdin.read())
    vectors = CachedEmbedder(RefusingEmbedder(), EmbeddingCache(default_cache_dir(tool_server_config().cache_dir))).embed(texts)
    print(json.dumps(vectors.tolist()))
    """
)


def test_another_process_reads_vectors_written_by_this_one(tmp_path, fast_model, code_chunks) -> None:
    """The cache is shared across checkouts; a second process under $CODELOOP_CACHE_DIR
    finds every vector without a model (its embedder refuses to run)."""
    texts = code_chunks[:4]
    ours = CachedEmbedder(fast_model, EmbeddingCache(tmp_path / "embeddings")).embed(texts)
    env = {"PATH": "/usr/bin:/bin", "CODELOOP_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _READER, fast_model.name],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.array(json.loads(done.stdout), dtype=np.float32), ours)


_WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from pathlib import Path
    from tool_servers.search.embedding.embed_cache import EmbeddingCache

    cache = EmbeddingCache(Path(sys.argv[1]))
    offset = int(sys.argv[2])
    for start in range(0, 400, 20):
        keys = [f"key-{offset + i}" for i in range(start, start + 20)]
        cache.put_many("m", {k: np.full(4, int(k[4:]), dtype=np.float32) for k in keys})
    """
)


def test_two_processes_writing_overlapping_entries_at_once_both_succeed(tmp_path) -> None:
    """Two indexers at once must not corrupt the shared cache; overlapping keys keep one row."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), str(offset)],
            cwd=Path(__file__).parents[2],
            stderr=subprocess.PIPE,
            text=True,
        )
        for offset in (0, 200)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    cache = EmbeddingCache(tmp_path)
    assert cache.count("m") == 600
    got = cache.get_many("m", [f"key-{i}" for i in (0, 250, 599)])
    assert [float(v[0]) for v in got.values()] == [0.0, 250.0, 599.0]


def test_the_cache_dir_follows_codeloop_cache_dir_else_the_platform_cache(monkeypatch, tmp_path) -> None:
    """Our contract: $CODELOOP_CACHE_DIR moves the shared cache; embeddings live in its `embeddings/`.
    Unset, the platform's user cache directory is used (on Linux `$XDG_CACHE_HOME/codeloop`)."""
    monkeypatch.setenv("CODELOOP_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir(tool_server_config().cache_dir) == tmp_path / "mine" / "embeddings"
    monkeypatch.delenv("CODELOOP_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tool_server_config().cache_dir is None
    assert default_cache_dir(None) == tmp_path / "xdg" / "codeloop" / "embeddings"


def test_unwritable_cache_location_raises_embedding_cache_error(tmp_path) -> None:
    """Our contract: SQLite and file-system failures surface as EmbeddingCacheError naming the path."""
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    with pytest.raises(EmbeddingCacheError, match="file"):
        EmbeddingCache(blocker / "embeddings")


def test_corrupt_cache_file_raises_embedding_cache_error(tmp_path) -> None:
    """Our contract: a damaged cache file gives a typed error that says how to recover."""
    (tmp_path / "embeddings.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(EmbeddingCacheError, match="delete the file"):
        EmbeddingCache(tmp_path).get_many("m", ["k"])
