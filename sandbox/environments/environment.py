"""`Environment`: a recipe made real — where its virtualenv, its copy of the project and its tools
are — and `EnvironmentInfo`, the short account of one use that tool results carry."""

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sandbox.environments.recipe import Recipe, RecipeKind

MANIFEST = "environment.json"
"""Written last, atomically, in an environment's directory: a directory without it is a build
that did not finish (crashed or still running), never used."""


class Environment(BaseModel):
    """A built environment (or, kind `venv`, the project's own virtualenv), as its manifest
    records it. Paths are absolute host paths, and the same inside the gVisor sandbox."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    key: str
    """The cache key: recipe, interpreter and the contents of the recipe's input files, hashed.
    For kind `venv`: `venv:` and the virtualenv's path."""
    recipe: Recipe
    path: Path
    """The environment's directory (`<cache>/<key>`); for kind `venv`, the project's virtualenv."""
    venv: Path
    """The virtualenv: VIRTUAL_ENV of the commands, its bin first on their PATH."""
    python: Path
    """The virtualenv's interpreter (`venv/bin/python`)."""
    python_version: str
    """The interpreter's full version, e.g. `3.9.18`."""
    base_prefix: Path
    """The installation the virtualenv's interpreter comes from (shown read-only in the sandbox)."""
    project_path: Path | None = None
    """The build's copy of the project, where editable installs point: the sandbox shows the
    workspace under test at this path too, so what is imported is the workspace. None: no copy
    (kind `venv`, or `copy_project=False`)."""
    import_roots: tuple[str, ...] = ()
    """Workspace-relative directories the project's editable install imports from (`src`, `.`),
    read from the installed `.pth` files: the process backend, which cannot mount the workspace at
    the project path, puts these first on PYTHONPATH instead."""
    build_products: tuple[str, ...] = ()
    """Project-relative paths the install commands created in the project copy (new files in
    directories the project had, and the roots of new directories; `__pycache__` left out):
    setuptools_scm's `_version.py`, `*.egg-info/`, extensions built in place. The workspace lacks
    them; the gVisor sandbox shows each one read-only over the workspace at the project path
    (never at /workspace, never on the host), unless the workspace has that path itself."""
    tools_path: Path | None = None
    """The directory of codeloop's test tools (`Recipe.tools`) the project lacked, appended to
    sys.path after site-packages by a `.pth` file; None when nothing had to be added."""
    built_at: datetime
    """When the build finished (for kind `venv`: when it was found)."""
    build_s: float
    """How long the build took (0 for kind `venv`)."""
    size_bytes: int
    """Disk used by the environment's directory (0 for kind `venv`: not codeloop's)."""
    base: "Environment | None" = None
    """A layered environment's parent (`Recipe.base`), as its manifest was when the layer was
    built: the sandbox shows it read-only too, its bin after the layer's. None: not a layer."""

    def chain(self) -> "tuple[Environment, ...]":
        """This environment, then its parent, its parent's parent...: every directory a command
        in it reads."""
        return (self, *(self.base.chain() if self.base is not None else ()))

    def info(self, *, built: bool, lookup_s: float) -> "EnvironmentInfo":
        """The account of one use of this environment (see `EnvironmentInfo`)."""
        return EnvironmentInfo(
            key=self.key,
            kind=self.recipe.kind,
            source=self.recipe.source,
            python=str(self.python),
            python_version=self.python_version,
            built=built,
            build_s=self.build_s,
            lookup_s=round(lookup_s, 4),
        )


Environment.model_rebuild()


class EnvironmentInfo(BaseModel):
    """Which project environment a command ran in, and what it cost to get it: what tool results
    (`run_tests.environment`) and `codeloop sandbox exec --json` carry, so a report can say it."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    key: str
    kind: RecipeKind
    source: str
    """What the recipe was made from (`requirements/tests.txt, pyproject.toml`, `uv.lock`...)."""
    python: str
    python_version: str
    built: bool
    """True when this use had to build it; False when it came from the cache (or is the
    project's own virtualenv)."""
    build_s: float
    """How long its build took (whenever it was built)."""
    lookup_s: float
    """Seconds this use spent getting it: detection, key, cache lookup, and the build if any."""
