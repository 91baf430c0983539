"""`open_environment`: a workspace's environment, found or built, held while the caller uses it."""

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import anyio

from sandbox.environments.detect import resolve_recipe
from sandbox.environments.environment import Environment
from sandbox.environments.pythons import query_interpreter
from sandbox.environments.recipe import Recipe
from sandbox.environments.settings import EnvironmentSettings
from sandbox.environments.store import EnvironmentStore, Lease, Progress
from sandbox.errors import RecipeInvalid


def project_venv(project: Path, recipe: Recipe) -> Environment:
    """The project's own virtualenv (a recipe of kind `venv`) as an environment: used as it is.

    Raises:
        RecipeInvalid: it is not there, or its interpreter does not run.
    """
    venv = project / (recipe.venv or ".venv")
    python = venv / "bin" / "python"
    found = query_interpreter(str(python))
    if found is None:
        raise RecipeInvalid(f"the project's virtualenv {venv} has no working interpreter")
    return Environment(
        key=f"venv:{venv}",
        recipe=recipe,
        path=venv,
        venv=venv,
        python=python,
        python_version=found.version,
        base_prefix=found.base_prefix,
        built_at=datetime.now(UTC),
        build_s=0.0,
        size_bytes=0,
    )


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
    started = time.monotonic()
    project = Path(await anyio.Path(project).resolve())
    if recipe is None:
        recipe = await anyio.to_thread.run_sync(resolve_recipe, project, settings)
    if recipe is None:
        yield None
        return
    if recipe.kind == "venv":
        environment = await anyio.to_thread.run_sync(project_venv, project, recipe)
        yield Lease(environment, environment.info(built=False, lookup_s=time.monotonic() - started))
        return
    async with EnvironmentStore(settings).use(recipe, project, progress=progress) as lease:
        info = lease.info.model_copy(update={"lookup_s": round(time.monotonic() - started, 4)})
        yield Lease(lease.environment, info)
