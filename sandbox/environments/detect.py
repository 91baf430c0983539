"""Detecting a project's recipe from its files (stub: the implementation follows)."""

from pathlib import Path

from sandbox.environments.recipe import Recipe
from sandbox.environments.settings import EnvironmentSettings


def detect_recipe(project: Path) -> Recipe | None:
    """The recipe the project's own files describe, most specific first; None when they describe
    none (then commands get codeloop's own interpreter).

    Raises:
        RecipeInvalid: a dependency file that decides the recipe cannot be read.
    """
    raise NotImplementedError


def resolve_recipe(project: Path, settings: EnvironmentSettings) -> Recipe | None:
    """The recipe for `project` under `settings`: None when environments are disabled; the
    `[environment]` override (`settings.install`, `settings.python`) when given; else
    `detect_recipe`, its Python replaced by `settings.python` when that is set.

    Raises:
        RecipeInvalid: see `detect_recipe`.
    """
    raise NotImplementedError
