"""Filling pytest's assertion-rewrite cache of codeloop's own interpreter, on the host, once.

pytest rewrites the asserts of every module of a distribution that provides a plugin (an entry
point in `pytest11`: hypothesis, anyio, xdist, ...), and caches each rewritten module as a
`__pycache__/NAME.<tag>-pytest-<version>.pyc` beside its source. Inside the sandbox codeloop's
virtualenv is shown read-only, so pytest can never write that cache there: every test run in the
sandbox re-parsed and recompiled all of those modules, which under gVisor is most of pytest's
start-up. Plain `.pyc` files do not help: pip writes them at install, but not pytest's.

So the host fills the cache once, before the first test run of a process needs it: it runs that
interpreter's pytest on one trivial test in an empty temporary directory, with bytecode writing
on. Only codeloop's own virtualenv is warmed, and only with a test file written here, so nothing
of the user's runs on the host; a sandboxed command can read the cache but never write it, so one
task cannot plant code that a later task's test run would load. When the virtualenv is not
writable, or pytest is missing, nothing happens and test runs are as slow as before.
"""

import importlib.metadata
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

log = logging.getLogger(__name__)

WARMUP_TIMEOUT_S = 120.0
_TEST = "def test_warm():\n    assert True\n"
# Variables that would change what the warm-up run loads, or stop it writing bytecode.
_DROPPED_ENV = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
_warmed: set[str] = set()
_lock = anyio.Lock()


def _pytest_tag() -> str | None:
    try:
        version = importlib.metadata.version("pytest")
    except importlib.metadata.PackageNotFoundError:
        return None
    return f"{sys.implementation.cache_tag}-pytest-{version}"


def _plugin_sources() -> list[Path]:
    """The source files of the modules the `pytest11` entry points of this environment name."""
    sources = []
    for entry in importlib.metadata.entry_points(group="pytest11"):
        if entry.dist is None:
            continue
        base = entry.module.replace(".", "/")
        for relative in (f"{base}.py", f"{base}/__init__.py"):
            path = Path(str(entry.dist.locate_file(relative)))
            if path.is_file():
                sources.append(path)
                break
    return sources


def rewrite_cache_path(source: Path, tag: str) -> Path:
    """Where pytest caches its rewrite of `source` (`__pycache__` beside it, no pycache prefix)."""
    return source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"


def _cached(source: Path, tag: str) -> bool:
    """Whether pytest's cached rewrite of `source` exists and is current. Its header is a pyc's
    (PEP 552): magic, flags, then the source's hash (flags bit 0, pytest 9) or mtime and size."""
    pyc = rewrite_cache_path(source, tag)
    try:
        header = pyc.read_bytes()[:16]
        data = source.read_bytes()
        mtime = int(source.stat().st_mtime)
    except OSError:
        return False
    if len(header) != 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    if int.from_bytes(header[4:8], "little") & 1:
        return header[8:16] == importlib.util.source_hash(data)[:8]
    return header[8:16] == (mtime & 0xFFFFFFFF).to_bytes(4, "little") + (len(data) & 0xFFFFFFFF).to_bytes(
        4, "little"
    )


def needs_warmup() -> bool:
    """Whether this interpreter's pytest plugins lack a valid rewrite cache."""
    tag = _pytest_tag()
    if tag is None:
        return False
    return not all(_cached(source, tag) for source in _plugin_sources())


async def warm_pytest_cache(python: str) -> None:
    """Fill the rewrite cache of `python` when it is the interpreter running codeloop and the
    cache is missing or stale; at most one attempt per process. Failures are logged, not raised:
    the cache only saves time."""
    if Path(python) != Path(sys.executable) or python in _warmed:
        return
    async with _lock:
        if python in _warmed:
            return
        _warmed.add(python)
        if not await anyio.to_thread.run_sync(needs_warmup):
            return
        env = {key: value for key, value in os.environ.items() if key not in _DROPPED_ENV}
        with tempfile.TemporaryDirectory(prefix="codeloop-pytest-warmup-") as tmp:
            (Path(tmp) / "test_warm.py").write_text(_TEST)
            argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_warm.py"]
            with anyio.move_on_after(WARMUP_TIMEOUT_S) as scope:
                result = await anyio.run_process(
                    argv, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT, check=False
                )
            if scope.cancelled_caught:
                log.warning("warming pytest's cache timed out after %.0f s", WARMUP_TIMEOUT_S)
            elif result.returncode != 0:
                tail = result.stdout.decode(errors="replace")[-500:]
                log.warning("warming pytest's cache failed (exit %s): %s", result.returncode, tail)
