"""Shared test set-up.

anyio's pytest plugin would run every test on every installed backend; nats-py, pydantic-ai,
lancedb's async API and uvicorn are asyncio-only, so asyncio is the
default here. The sandbox tests parametrize `anyio_backend` themselves to also run on trio.
"""

import os
from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with slow tests first, each file's tests in their order. pytest-xdist hands out
    whole files (`--dist loadfile`) in collection order when told not to reorder them
    (`--no-loadscope-reorder`, `make test`): a minute-long file started last would be the run's
    tail, one worker busy while the other has finished."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _run_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of this test run: with pytest-xdist the parent of the workers' base
    temporary directories (one per worker), which every worker of the run shares."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def _private_codeloop_dirs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Keep the suite off the user's ~/.codeloop, ~/.cache/codeloop (state, embedding cache) and
    ~/.config/codeloop/config.toml (a developer's own models and budgets); tests that need their
    own directories still set these variables themselves.

    CODELOOP_CACHE_DIR reaches the CLI's subprocesses (`codeloop.config` reads it); XDG_CACHE_HOME
    moves the platform cache directory that library calls in this process fall back to. Both
    name one directory, so a model converted by either is reused by the other. That cache is the
    run's, shared by the pytest-xdist workers (`shared_cache_root`): the embedding model is
    converted for OpenVINO once per run rather than once per worker (it imports torch and traces
    the model), and an environment one worker built is found by the other. Everything in it is safe to share between processes by design (the converted
    model is renamed into place, the embedding cache is SQLite in WAL mode, environments are built
    under a lock). The state and configuration directories stay private to each worker.

    Returns the cache directory (CODELOOP_CACHE_DIR)."""
    base = tmp_path_factory.mktemp("codeloop-user")
    xdg_cache = _run_directory(tmp_path_factory) / "xdg-cache"
    cache = xdg_cache / "codeloop"
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["CODELOOP_HOME"] = str(base / "home")
    os.environ["XDG_CACHE_HOME"] = str(xdg_cache)
    os.environ["CODELOOP_CACHE_DIR"] = str(cache)
    os.environ["XDG_CONFIG_HOME"] = str(base / "xdg-config")
    return cache


@pytest.fixture(scope="session")
def shared_cache_root(_private_codeloop_dirs: Path) -> Path:
    """codeloop's cache directory of this run (CODELOOP_CACHE_DIR, its `environments/` and
    `openvino/`), shared by the pytest-xdist workers, whose store's build lock makes them build
    each environment once."""
    return _private_codeloop_dirs


@pytest.fixture
def private_cache_dir(tmp_path: Path, shared_cache_root: Path) -> Path:
    """`tmp_path/cache`, a codeloop cache directory of the test's own (its embedding cache, indexes
    and environments start empty) whose `openvino/` is a link to the run's: the embedding model,
    converted once per run, is found there instead of converted again (a conversion imports torch
    and traces the model, about 12 s of CPU). For tests that check what a fresh cache does, not
    how the model is converted (`tests/search_embed/test_openvino.py` does that)."""
    # Here, not at the top: the embedder's module imports numpy, which collection need not pay.
    from tool_servers.search.embedding.embed import OPENVINO_DIR

    converted = shared_cache_root / OPENVINO_DIR
    converted.mkdir(exist_ok=True)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / OPENVINO_DIR).symlink_to(converted, target_is_directory=True)
    return cache
