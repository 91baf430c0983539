"""The host fills pytest's rewrite cache of codeloop's interpreter, which the sandbox cannot write."""

import sys

import pytest

from tool_servers.exec import pytest_warmup
from tool_servers.exec.pytest_warmup import (
    _plugin_sources,
    _pytest_tag,
    needs_warmup,
    rewrite_cache_path,
    warm_pytest_cache,
)

pytestmark = pytest.mark.anyio


def _cache_of(source):
    return rewrite_cache_path(source, _pytest_tag())  # pyright: ignore[reportArgumentType] - the interpreter's pytest tag is set for the installed pytest


async def test_a_missing_rewrite_cache_is_filled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = _plugin_sources()
    if _pytest_tag() is None or not sources:
        pytest.skip("this interpreter has no pytest plugins to warm")
    monkeypatch.setattr(pytest_warmup, "_warmed", set())
    victim = _cache_of(sources[0])
    victim.unlink(missing_ok=True)
    assert needs_warmup()

    await warm_pytest_cache(sys.executable)

    assert victim.is_file()
    assert not needs_warmup()


async def test_a_stale_cache_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = _plugin_sources()
    if _pytest_tag() is None or not sources:
        pytest.skip("this interpreter has no pytest plugins to warm")
    monkeypatch.setattr(pytest_warmup, "_warmed", set())
    await warm_pytest_cache(sys.executable)
    victim = _cache_of(sources[0])
    data = bytearray(victim.read_bytes())
    data[8] ^= 0xFF  # the source hash (or mtime) no longer matches the source
    victim.write_bytes(bytes(data))
    assert needs_warmup()
    monkeypatch.setattr(pytest_warmup, "_warmed", set())

    await warm_pytest_cache(sys.executable)

    assert not needs_warmup()


async def test_only_codeloops_own_interpreter_is_warmed(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A workspace's own interpreter is the user's code: nothing of it runs on the host."""
    ran = []
    monkeypatch.setattr(pytest_warmup, "_warmed", set())
    monkeypatch.setattr(pytest_warmup, "needs_warmup", lambda: ran.append(True) or False)
    await warm_pytest_cache(str(tmp_path / ".venv" / "bin" / "python"))
    assert ran == []
    await warm_pytest_cache(sys.executable)
    assert ran == [True]
