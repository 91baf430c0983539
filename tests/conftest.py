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


@pytest.fixture(scope="session", autouse=True)
def _private_codeloop_dirs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the suite off the user's ~/.codeloop, ~/.cache/codeloop (state, embedding cache) and
    ~/.config/codeloop/config.toml (a developer's own models and budgets); tests that need their
    own directories still set these variables themselves.

    CODELOOP_CACHE_DIR reaches the CLI's subprocesses (`codeloop.config` reads it); XDG_CACHE_HOME
    moves the platform cache directory that library calls in this process fall back to. Both
    name one directory, so a model converted by either is reused by the other."""
    base = tmp_path_factory.mktemp("codeloop-user")
    os.environ["CODELOOP_HOME"] = str(base / "home")
    os.environ["XDG_CACHE_HOME"] = str(base / "xdg-cache")
    os.environ["CODELOOP_CACHE_DIR"] = str(base / "xdg-cache" / "codeloop")
    os.environ["XDG_CONFIG_HOME"] = str(base / "xdg-config")


@pytest.fixture(scope="session")
def shared_cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """codeloop's cache directory for the tests that build project environments (its
    `environments/`): one per test run, shared by the pytest-xdist workers (it sits beside their
    base temporary directories), whose store's build lock makes them build each key once."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = shared / "codeloop-cache"
    cache.mkdir(exist_ok=True)
    return cache
