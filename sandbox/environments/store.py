"""The environment cache: one directory per key under `settings.cache_dir`, built once, leased
while used, evicted least-recently-used past the size limit.

Files beside each environment's directory `<key>/`:

- `<key>.lock` — the build lock (filelock): two processes wanting the same missing environment
  build it once; the second waits, then finds it.
- `<key>.lease` — users hold a shared `flock` on it while they use the environment; eviction and
  `remove` take it exclusively without waiting, so an environment in use is never removed. The
  kernel drops a dead process's lease.
- `<key>.used` — its mtime is the last use, for least-recently-used eviction.

A layered environment (`Recipe.base`) needs its parent: the parent must be in the cache (the
caller builds it first, with its own recipe and project); the layer's build and every use of the
layer hold the parent's lease too, so a parent is never removed under a live child, and removing
a parent removes its children first (none can be in use: their users hold the parent's lease).

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
from sandbox.environments.pythons import Interpreter, find_python, satisfies
from sandbox.environments.recipe import Recipe
from sandbox.environments.settings import EnvironmentSettings
from sandbox.errors import RecipeInvalid

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
            RecipeInvalid, PythonNotFound: see `find_python` (and `parent` for a layer).
        """
        return environment_key(recipe, self._interpreter(recipe), project)

    def parent(self, recipe: Recipe) -> Environment | None:
        """The built parent of a layered recipe (`Recipe.base`); None for a plain recipe.

        Raises:
            RecipeInvalid: the parent is not in the cache, or its Python does not satisfy `recipe.python`.
        """
        if recipe.base is None:
            return None
        parent = self.load(recipe.base)
        if parent is None:
            raise RecipeInvalid(
                f"the environment {recipe.base} this layer is based on is not in the cache {self.root}: "
                "build (and lease) the parent first"
            )
        if recipe.python is not None and not satisfies(parent.python_version, recipe.python):
            raise RecipeInvalid(
                f"the layer asks for Python {recipe.python}; its parent {parent.key} has {parent.python_version}"
            )
        return parent

    def _interpreter(self, recipe: Recipe) -> Interpreter:
        parent = self.parent(recipe)
        if parent is None:
            return find_python(recipe.python, configured=tuple(self.settings.python_paths))
        # The layer's virtualenv is made by the parent's: the same interpreter, one more level.
        return Interpreter(
            executable=parent.python, version=parent.python_version, base_prefix=parent.base_prefix
        )

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
            environment = await self._build(recipe, project, key, say)
        finally:
            lock.release()
        keep = frozenset(env.key for env in environment.chain())
        evicted = await anyio.to_thread.run_sync(lambda: self.evict(keep=keep))
        if evicted:
            say(f"evicted least recently used environments: {', '.join(evicted)}")
        return environment, True

    async def _build(self, recipe: Recipe, project: Path, key: str, say: Progress) -> Environment:
        """Builds `key` (its build lock held); a layer's parent stays leased meanwhile."""
        parents = await self._lease_chain(recipe)
        try:
            parent = await anyio.to_thread.run_sync(self.parent, recipe)
            interpreter = await anyio.to_thread.run_sync(self._interpreter, recipe)
            over = f"; layered over {parent.key}" if parent is not None else ""
            say(f"building environment {key} ({recipe.source}; Python {interpreter.version}{over})")
            builder = Builder(
                recipe,
                project,
                self._dir(key),
                key=key,
                interpreter=interpreter,
                build_env=self.settings.build_env,
                base=parent,
            )
            environment = await builder.build(timeout_s=self.settings.build_timeout_s, progress=say)
        finally:
            for fd in parents:
                os.close(fd)
        await anyio.to_thread.run_sync(self._touch, key)
        say(f"built environment {key} in {environment.build_s:.1f} s")
        return environment

    async def _lease_chain(self, recipe: Recipe) -> list[int]:
        """Leases of a layered recipe's parent and its ancestors (nothing for a plain recipe).

        Raises:
            RecipeInvalid: the parent is not in the cache (or was removed before its lease).
        """
        parent = await anyio.to_thread.run_sync(self.parent, recipe)
        leases: list[int] = []
        try:
            for env in parent.chain() if parent is not None else ():
                leases.append(await anyio.to_thread.run_sync(self._take_lease, env.key))
                if await anyio.to_thread.run_sync(self.load, env.key) is None:
                    raise RecipeInvalid(f"the environment {env.key} was removed before it could be leased")
        except BaseException:
            for fd in leases:
                os.close(fd)
            raise
        return leases

    @asynccontextmanager
    async def use(
        self, recipe: Recipe, project: Path, *, progress: Progress | None = None
    ) -> AsyncIterator[Lease]:
        """`ensure`, then hold the environment (a lease) until the block ends.

        Raises:
            RecipeInvalid, PythonNotFound, BuildFailed: see `ensure`.
        """
        started = time.monotonic()
        # A layer's parents first: held for the whole use, so neither is evicted under it.
        parents = await self._lease_chain(recipe)
        try:
            while True:
                environment, built = await self.ensure(recipe, project, progress=progress)
                lease = await anyio.to_thread.run_sync(self._take_lease, environment.key)
                # Evicted between the lookup and the lease: find or build it again.
                if await anyio.to_thread.run_sync(self.load, environment.key) is not None:
                    break
                os.close(lease)
            try:
                for env in environment.chain():
                    await anyio.to_thread.run_sync(self._touch, env.key)
                yield Lease(environment, environment.info(built=built, lookup_s=time.monotonic() - started))
            finally:
                os.close(lease)  # closing the descriptor drops the shared lock
        finally:
            for fd in parents:
                os.close(fd)

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

    def children(self, key: str) -> list[str]:
        """The keys of the finished environments layered directly over `key`."""
        return [env.key for env in self.environments() if env.base is not None and env.base.key == key]

    def remove(self, key: str) -> bool:
        """Removes one environment, and the layers over it first, unless one of them is in use or
        being built; True when it was removed."""
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
                # Held exclusively, no child can be leased or built now (both lease the parent).
                if not all(self.remove(child) for child in self.children(key)):
                    return False
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
        gone: set[str] = set()
        for env in reversed(environments):  # least recently used first
            if total <= limit:
                break
            if env.key in keep or env.key in gone:
                continue
            layers = self._descendants(env.key, environments)
            if keep & {layer.key for layer in layers}:
                continue  # the parent of a layer to keep
            if self.remove(env.key):
                for layer in (env, *layers):
                    if layer.key not in gone:
                        gone.add(layer.key)
                        removed.append(layer.key)
                        total -= layer.size_bytes
        return removed

    @staticmethod
    def _descendants(key: str, environments: list[Environment]) -> list[Environment]:
        """The layers over `key`, their layers, and so on."""
        found: list[Environment] = []
        wanted = {key}
        for env in sorted(environments, key=lambda env: len(env.chain())):
            if env.base is not None and env.base.key in wanted:
                found.append(env)
                wanted.add(env.key)
        return found
