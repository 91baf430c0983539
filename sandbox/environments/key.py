"""The cache key of an environment: what would make a different environment, hashed."""

import hashlib
import json
from pathlib import Path

from sandbox.environments.pythons import Interpreter
from sandbox.environments.recipe import Recipe
from sandbox.errors import RecipeInvalid

MECHANISM = 1
"""Bumped when the build changes in a way old environments do not have (a new layout, a step)."""
KEY_CHARS = 16
"""64 bits: collisions are out of reach for one machine's cache, and the short directory name
keeps the virtualenv's shebang lines well under the kernel's 127-byte limit."""


def input_digest(project: Path, relative: str) -> str:
    """sha256 of one input file of the project ("absent" when it does not exist).

    Raises:
        RecipeInvalid: the path leaves the project, or the file cannot be read.
    """
    path = project / relative
    if Path(relative).is_absolute() or not path.resolve().is_relative_to(project.resolve()):
        raise RecipeInvalid(f"the recipe's input {relative!r} is not a path inside the project")
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        raise RecipeInvalid(f"cannot read the recipe's input {relative}: {exc}") from exc


def environment_key(recipe: Recipe, interpreter: Interpreter, project: Path) -> str:
    """Hash of the recipe (without its description), the interpreter (binary and full version)
    and the contents of the recipe's input files in `project`.

    Raises:
        RecipeInvalid: an input path leaves the project or cannot be read.
    """
    material = {
        "mechanism": MECHANISM,
        "recipe": recipe.digest(),
        "python": [str(interpreter.executable), interpreter.version],
        "inputs": {rel: input_digest(project, rel) for rel in sorted(set(recipe.inputs))},
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:KEY_CHARS]
