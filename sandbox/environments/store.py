"""The environment cache: one directory per key under `settings.cache_dir`, built once, leased
while used, evicted least-recently-used past the size limit.

Files beside each environment's directory `<key>/`:

- `<key>.lock` — the build lock (filelock): two processes wanting the same missing environment
  build it once; the second waits, then finds it.
- `<key>.lease` — users hold a shared `flock` on it while they use the environment; eviction and
  `remove` take it exclusively without waiting, so an environment in use is never removed. The
  kernel drops a dead process's lease.
- `<key>.used` — its mtime is the last use, for least-recently-used eviction.

An environment exists once its manifest (`environment.json`) does: it is written last
(`build.write_manifest`). A directory without one under a free build lock is a build that
crashed: the next build of that key removes it and starts again; it is never used.
"""

import fcntl
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
from filelock import FileLock, Timeout
from pydantic import ValidationError

from sandbox.environments.build import Builder
from sandbox.environments.environment import MANIFEST, Environment, EnvironmentInfo
from sandbox.environments.key import environment_key
from sandbox.environments.pythons import find_python
from sandbox.environments.recipe import Recipe
from sandbox.environments.settings import EnvironmentSettings

Progress = Callable[[str], None]
"""Receives one line at a time about a build's progress (steps, pip's output)."""
LOCK_POLL_S = 0.2
_TRASH = ".trash"


@dataclass(frozen=True)
class Lease:
    """An environment held for use: never evicted or removed while the lease is open."""

    environment: Environment
    info: EnvironmentInfo


def _try_lock(lock: FileLock) -> bool:
    """Takes the lock if it is free, without waiting (filelock raises Timeout instead of saying no)."""
    try:
        lock.acquire(blocking=False)
    except Timeout:
        return False
    return True


def _quiet(_: str) -> None:
    return None


class EnvironmentStore:
    """The environments of one cache directory (`settings.cache_dir`)."""

    def __init__(self, settings: EnvironmentSettings) -> None:
        self.settings = settings
        self.root = settings.cache_dir

    def _dir(self, key: str) -> Path:
        return self.root / key

    def key(self, recipe: Recipe, project: Path) -> str:
        """The cache key of `recipe` built from `project`.

        Raises:
            RecipeInvalid, PythonNotFound: see `find_python`.
        """
        interpreter = find_python(recipe.python, configured=tuple(self.settings.python_paths))
        return environment_key(recipe, interpreter, project)

    def load(self, key: str) -> Environment | None:
        """The finished environment of `key`, or None (absent, unfinished or unreadable)."""
        try:
            return Environment.model_validate_json((self._dir(key) / MANIFEST).read_text())
        except (OSError, ValidationError):
            return None

    def lookup(self, recipe: Recipe, project: Path) -> Environment | None:
        """The finished environment of this recipe and project files, if the cache has it.

        Raises:
            RecipeInvalid, PythonNotFound: see `find_python`.
        """
        return self.load(self.key(recipe, project))

    async def ensure(
        self, recipe: Recipe, project: Path, *, progress: Progress | None = None
    ) -> tuple[Environment, bool]:
        """The environment, built first when the cache lacks it; True when this call built it.

        Raises:
            RecipeInvalid, PythonNotFound: see `find_python`.
            BuildFailed: a build step failed (the message names it and the log's tail).
        """
        say = progress or _quiet
        key = await anyio.to_thread.run_sync(self.key, recipe, project)
        found = await anyio.to_thread.run_sync(self.load, key)
        if found is not None:
            return found, False
        await anyio.to_thread.run_sync(lambda: self.root.mkdir(parents=True, exist_ok=True))
        lock = FileLock(self.root / f"{key}.lock", thread_local=False)
        if not _try_lock(lock):
            say(f"waiting for another process building environment {key}")
            # Polled without blocking, in this thread: a lock taken by a worker thread after a
            # cancellation would never be released. The other build takes minutes; 0.2 s is noise.
            while not _try_lock(lock):  # noqa: ASYNC110
                await anyio.sleep(LOCK_POLL_S)
        try:
            found = await anyio.to_thread.run_sync(self.load, key)
            if found is not None:
                return found, False
            # A directory without a manifest under a free lock: a build that crashed.
            await anyio.to_thread.run_sync(self._discard, key)
            interpreter = find_python(recipe.python, configured=tuple(self.settings.python_paths))
            say(f"building environment {key} ({recipe.source}; Python {interpreter.version})")
            builder = Builder(
                recipe,
                project,
                self._dir(key),
                key=key,
                interpreter=interpreter,
                build_env=self.settings.build_env,
            )
            environment = await builder.build(timeout_s=self.settings.build_timeout_s, progress=say)
            await anyio.to_thread.run_sync(self._touch, key)
            say(f"built environment {key} in {environment.build_s:.1f} s")
        finally:
            lock.release()
        evicted = await anyio.to_thread.run_sync(lambda: self.evict(keep=frozenset({key})))
        if evicted:
            say(f"evicted least recently used environments: {', '.join(evicted)}")
        return environment, True

    @asynccontextmanager
    async def use(
        self, recipe: Recipe, project: Path, *, progress: Progress | None = None
    ) -> AsyncIterator[Lease]:
        """`ensure`, then hold the environment (a lease) until the block ends.

        Raises:
            RecipeInvalid, PythonNotFound, BuildFailed: see `ensure`.
        """
        started = time.monotonic()
        while True:
            environment, built = await self.ensure(recipe, project, progress=progress)
            lease = await anyio.to_thread.run_sync(self._take_lease, environment.key)
            # Evicted between the lookup and the lease: find or build it again.
            if await anyio.to_thread.run_sync(self.load, environment.key) is not None:
                break
            os.close(lease)
        try:
            await anyio.to_thread.run_sync(self._touch, environment.key)
            yield Lease(environment, environment.info(built=built, lookup_s=time.monotonic() - started))
        finally:
            os.close(lease)  # closing the descriptor drops the shared lock

    def _take_lease(self, key: str) -> int:
        fd = os.open(self.root / f"{key}.lease", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)
        return fd

    def _touch(self, key: str) -> None:
        (self.root / f"{key}.used").touch()

    def _last_used(self, key: str) -> float:
        try:
            return (self.root / f"{key}.used").stat().st_mtime
        except FileNotFoundError:
            return 0.0

    def environments(self) -> list[Environment]:
        """Every finished environment in the cache, most recently used first."""
        if not self.root.is_dir():
            return []
        found = [env for entry in self.root.iterdir() if entry.is_dir() and (env := self.load(entry.name))]
        return sorted(found, key=lambda env: self._last_used(env.key), reverse=True)

    def last_used(self, key: str) -> float:
        """When `key` was last used (epoch seconds; 0 when never recorded)."""
        return self._last_used(key)

    def in_use(self, key: str) -> bool:
        """Whether some process holds a lease on `key` now."""
        fd = os.open(self.root / f"{key}.lease", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def remove(self, key: str) -> bool:
        """Removes one environment unless it is in use or being built; True when it was removed."""
        lock = FileLock(self.root / f"{key}.lock", thread_local=False)
        if not self._dir(key).exists() or not _try_lock(lock):
            return False
        try:
            fd = os.open(self.root / f"{key}.lease", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                self._discard(key)
            finally:
                os.close(fd)
        finally:
            lock.release()
        return True

    def remove_unfinished(self) -> list[str]:
        """Removes builds that crashed half-way (a directory without a manifest whose build lock
        is free) and what an interrupted removal left; returns their keys."""
        if not self.root.is_dir():
            return []
        removed = []
        for entry in self.root.iterdir():
            if not entry.is_dir() or entry.name == _TRASH or (entry / MANIFEST).exists():
                continue
            lock = FileLock(self.root / f"{entry.name}.lock", thread_local=False)
            if _try_lock(lock):
                try:
                    self._discard(entry.name)
                    removed.append(entry.name)
                finally:
                    lock.release()
        shutil.rmtree(self.root / _TRASH, ignore_errors=True)
        return removed

    def _discard(self, key: str) -> None:
        """Moves the key's directory aside (atomically: no reader sees half of it), then deletes it."""
        directory = self._dir(key)
        if not directory.exists():
            return
        trash = self.root / _TRASH / f"{key}-{uuid.uuid4().hex[:8]}"
        trash.parent.mkdir(exist_ok=True)
        os.replace(directory, trash)
        (self.root / f"{key}.used").unlink(missing_ok=True)
        shutil.rmtree(trash, ignore_errors=True)

    def evict(self, *, keep: frozenset[str] = frozenset()) -> list[str]:
        """Removes least recently used environments not in use until the cache fits its limit;
        returns the keys removed."""
        limit = self.settings.max_size_mb * 1024 * 1024
        if limit <= 0:
            return []
        environments = self.environments()
        total = sum(env.size_bytes for env in environments)
        removed = []
        for env in reversed(environments):  # least recently used first
            if total <= limit:
                break
            if env.key not in keep and self.remove(env.key):
                removed.append(env.key)
                total -= env.size_bytes
        return removed
