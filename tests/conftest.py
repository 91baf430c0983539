"""Shared test set-up.

anyio's pytest plugin would run every test on every installed backend; nats-py, pydantic-ai,
lancedb's async API and uvicorn are asyncio-only (LIBRARIES.md section 0), so asyncio is the
default here. The sandbox tests parametrize `anyio_backend` themselves to also run on trio.
"""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
