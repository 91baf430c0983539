"""`Recipe`: what an environment is made of — a Python and ordered install commands — and which
files of the project its build reads. A recipe is data: detection (`detect.py`), the `[environment]`
settings and the SWE-bench harness all produce one, and one builder (`build.py`) makes it real."""

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RecipeKind = Literal[
    "configured",
    "venv",
    "uv",
    "poetry",
    "pdm",
    "pyproject",
    "requirements",
    "setup",
    "tox",
    "python",
    "custom",
]
"""Where a recipe came from: `configured` the `[environment]` settings; `venv` the project's own
virtualenv (used read-only, never built); `uv`, `poetry`, `pdm` a lock file; `pyproject` PEP 735
dependency groups, test/dev extras or just the project's own dependencies; `requirements`
requirement files; `setup` setup.py/setup.cfg; `tox` tox.ini's test environment; `python` only a
Python version (`.python-version`); `custom` made by a caller (e.g. the SWE-bench harness)."""

DEFAULT_TOOLS = ("pytest", "coverage")
"""codeloop's test tools, installed beside (never into) the project's packages when it lacks them."""


class Recipe(BaseModel):
    """How to make an environment: a virtualenv of `python` in which `install` runs, in order.

    Each install command is a shell command (bash, else sh) run on the host with the virtualenv
    active (VIRTUAL_ENV set, its bin first on PATH, `pip` and `python` being its own), the
    working directory being the environment's copy of the project (its project path), the
    package index reachable, and a clean environment: the build passes on only the host's
    package-index, proxy and TLS variables (`EnvironmentSettings.build_env`) plus `env`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    kind: RecipeKind
    source: str
    """What it was made from, for people: `uv.lock`, `requirements/tests.txt, pyproject.toml`,
    `[environment] in codeloop.toml`, `SWE-bench spec of pallets/flask 2.3`."""
    python: str | None = None
    """The Python wanted: a version (`3.9`, `3.9.18`), a specifier (`>=3.8,<3.11`, as in
    requires-python) or an interpreter's absolute path. None: any; the interpreter running
    codeloop is preferred whenever it satisfies the request."""
    install: tuple[str, ...] = ()
    """Shell commands run in order in the new virtualenv (e.g. `pip install -r requirements.txt`,
    `pip install -e .`). A command that exits non-zero fails the build (`BuildFailed`)."""
    inputs: tuple[str, ...] = ()
    """Project-relative paths of the files the build reads (lock files, pyproject.toml,
    requirement files, setup.cfg, tox.ini...): their contents are hashed into the key, so an edit
    to one makes a new environment. A listed file that does not exist is hashed as absent."""
    env: dict[str, str] = Field(default_factory=dict)
    """More environment variables for the install commands (part of the key)."""
    build_requires: tuple[str, ...] = ()
    """Requirements of programs the install commands run that must not land in the environment
    (e.g. `poetry`): installed into a throw-away virtualenv whose bin follows the environment's on
    the build's PATH."""
    tools: tuple[str, ...] = DEFAULT_TOOLS
    """codeloop's test tools (requirement specs). Each one the environment lacks after `install`
    is installed into the environment's separate tools directory, which the interpreter appends
    to sys.path after site-packages: the project's own (pinned) packages always win, and none of
    them is changed. Empty: none."""
    copy_project: bool = True
    """Copy the project tree into the environment (its project path) and run the install commands
    there, so an editable install (`pip install -e .`) points at the project path, where the
    sandbox shows the workspace under test. False: the commands run in an empty directory."""
    venv: str | None = None
    """Kind `venv` only: the project's own virtualenv (a path relative to the project), used as it
    is, read-only; nothing is built."""
    index_date: str | None = None
    """Resolve requirements as the package index was at this time (ISO 8601, e.g.
    `2023-02-22T14:00:17Z`): every build step gets UV_EXCLUDE_NEWER (uv's --exclude-newer) and
    PIP_UPLOADED_PRIOR_TO (pip 25+'s --uploaded-prior-to; local indexes without upload times are
    not bounded by pip). An old tree's loose requirements then get the releases of its time, not
    today's. None: the newest."""
    key_extra: dict[str, str] = Field(default_factory=dict)
    """More values hashed into the key without changing the build (e.g. the commit an
    environment's files were read from)."""
    base: str | None = None
    """A layered environment: the key of the built environment (its parent) this one is layered
    over. The layer is a virtualenv of the parent's interpreter whose site-packages sees the
    parent's after its own; `install` runs into the layer (what it adds or upgrades lands there,
    the parent is never changed); its key is the parent's key, this recipe and its own inputs. It
    is leased together with its parent, and a parent is never removed under a child. `python`,
    if given, must be satisfied by the parent's interpreter. None: a plain environment."""

    def digest(self) -> str:
        """sha256 of the recipe's canonical JSON: every field but `source` (a description), and
        `base` only when set (plain recipes keep the keys they had before layers existed)."""
        excluded = {"source"} if self.base is not None else {"source", "base"}
        data = self.model_dump(mode="json", exclude=excluded)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
