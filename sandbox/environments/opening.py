"""`open_environment`: a workspace's environment, found or built, held while the caller uses it."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sandbox.environments.recipe import Recipe
from sandbox.environments.settings import EnvironmentSettings
from sandbox.environments.store import Lease, Progress


@asynccontextmanager
async def open_environment(
    project: Path,
    settings: EnvironmentSettings,
    *,
    recipe: Recipe | None = None,
    progress: Progress | None = None,
) -> AsyncIterator[Lease | None]:
    """The environment for `project`: `recipe`, else `resolve_recipe(project, settings)`; built
    from `project`'s files when the cache lacks it, and leased (never evicted) until the block
    ends. Yields None when there is no recipe (environments disabled, or nothing detectable):
    the caller then runs commands with codeloop's own interpreter.

    Raises:
        EnvironmentSetupError: RecipeInvalid, PythonNotFound or BuildFailed (failure class env.setup).
    """
    raise NotImplementedError
    yield
