"""Fixtures for the code index tests: the real embedding model (loaded once per session, with a
session-private embedding cache) and copies of an installed library's source that nobody here
wrote (anyio), which the tests index and edit."""

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from tool_servers.search.embedding.embed import CachedEmbedder, load_embedder
from tool_servers.search.index.code_index import CodeIndex, open_index
from tool_servers.search.models import IndexReport

ANYIO_SRC = Path(anyio.__file__).parent

# About 200 chunks: enough real structure (functions, classes, overloads, long bodies) to rank
# against, small enough that the model embeds it in seconds.
CORPUS = [
    "_core/_sockets.py",
    "_core/_tasks.py",
    "_core/_eventloop.py",
    "_core/_resources.py",
    "_core/_signals.py",
    "_core/_streams.py",
    "_core/_subprocesses.py",
    "_core/_contextmanagers.py",
    "_core/_typedattr.py",
    "_core/_exceptions.py",
    "abc/_tasks.py",
    "streams/memory.py",
    "to_thread.py",
]
SMALL_CORPUS = ["_core/_tasks.py", "_core/_signals.py", "_core/_resources.py", "to_thread.py"]


def copy_corpus(dest: Path, files: list[str] = CORPUS) -> Path:
    """Copy `files` of anyio's installed source under `dest` with their relative paths."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ANYIO_SRC / rel, target)
    return dest


@pytest.fixture(name="copy_corpus")
def copy_corpus_fixture() -> Callable[..., Path]:
    """`copy_corpus(dest, files=CORPUS)` for tests that need their own editable copy."""
    return copy_corpus


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> CachedEmbedder:
    """The bundled model behind an embedding cache private to this session."""
    return load_embedder(cache_dir=tmp_path_factory.mktemp("embedding-cache"))


@pytest.fixture(scope="module")
def indexed(
    tmp_path_factory: pytest.TempPathFactory, embedder: CachedEmbedder
) -> Iterator[tuple[CodeIndex, IndexReport]]:
    """(CodeIndex, IndexReport) of one shared copy of the corpus, built once per module; tests
    using it must not change the files."""
    repo = copy_corpus(tmp_path_factory.mktemp("anyio-copy"))
    (repo / "README.md").write_text(
        "# anyio copy\n\nA few modules of anyio.\n\n## Sockets\n\nTCP and UDP helpers.\n"
    )
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))

    async def build() -> tuple[CodeIndex, IndexReport]:
        index = await open_index(repo, embedder=embedder)
        return index, await index.update()

    yield anyio.run(build)
