"""The environment cache (stub: the implementation follows)."""

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from sandbox.environments.environment import Environment, EnvironmentInfo
from sandbox.environments.recipe import Recipe
from sandbox.environments.settings import EnvironmentSettings

Progress = Callable[[str], None]
"""Receives one line at a time about a build's progress (steps, pip's output)."""


@dataclass(frozen=True)
class Lease:
    """An environment held for use: never evicted or removed while the lease is open."""

    environment: Environment
    info: EnvironmentInfo


class EnvironmentStore:
    """The environments of one cache directory (`settings.cache_dir`)."""

    def __init__(self, settings: EnvironmentSettings) -> None:
        self.settings = settings
        self.root = settings.cache_dir

    def key(self, recipe: Recipe, project: Path) -> str:
        """The cache key of `recipe` built from `project`.

        Raises:
            RecipeInvalid, PythonNotFound: see `find_python`.
        """
        raise NotImplementedError

    def lookup(self, recipe: Recipe, project: Path) -> Environment | None:
        """The finished environment of this recipe and project files, if the cache has it."""
        raise NotImplementedError

    async def ensure(
        self, recipe: Recipe, project: Path, *, progress: Progress | None = None
    ) -> tuple[Environment, bool]:
        """The environment, built first when the cache lacks it; True when this call built it."""
        raise NotImplementedError

    @asynccontextmanager
    async def use(
        self, recipe: Recipe, project: Path, *, progress: Progress | None = None
    ) -> AsyncIterator[Lease]:
        """`ensure`, then hold the environment (a lease) until the block ends."""
        raise NotImplementedError
        yield

    def environments(self) -> list[Environment]:
        """Every finished environment in the cache, most recently used first."""
        raise NotImplementedError

    def remove(self, key: str) -> bool:
        """Removes one environment unless it is in use; True when it was removed."""
        raise NotImplementedError

    def evict(self) -> list[str]:
        """Removes least recently used environments not in use until the cache fits its limit."""
        raise NotImplementedError
