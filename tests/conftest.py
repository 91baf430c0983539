"""Shared test set-up.

anyio's pytest plugin would run every test on every installed backend; nats-py, pydantic-ai,
lancedb's async API and uvicorn are asyncio-only, so asyncio is the
default here. The sandbox tests parametrize `anyio_backend` themselves to also run on trio.
"""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _private_codeloop_dirs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the suite off the user's ~/.codeloop and ~/.cache/codeloop (state, embedding cache);
    tests that need their own directories still set these variables themselves."""
    import os

    base = tmp_path_factory.mktemp("codeloop-user")
    os.environ["CODELOOP_HOME"] = str(base / "home")
    os.environ["CODELOOP_CACHE_DIR"] = str(base / "cache")
