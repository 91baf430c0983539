"""Project environments: a recipe made real once, cached on disk, mounted read-only in the sandbox.

    settings = EnvironmentSettings(cache_dir=cache / "environments")
    async with open_environment(workspace, settings) as lease:          # None: no recipe
        async with open_sandbox(workspace, limits=limits, environment=lease and lease.environment) as box:
            result = await box.exec(["python", "-m", "pytest", "-q"])

A `Recipe` is a Python (version, specifier or path) and ordered shell install commands, with the
project files its build reads (hashed into the key) and extra build variables. It comes from the
`[environment]` settings, from the project's files (`detect.py`: its own `.venv`, uv.lock,
poetry.lock, pdm.lock, PEP 735 groups and test/dev extras, requirement files, setup.py/setup.cfg,
tox.ini), or from a caller such as the SWE-bench harness.

Building (`build.py`) happens on the host, as subprocesses in their own process group with a clean
environment (the package index's settings pass, secrets do not), and may reach the package index:
a virtualenv of the interpreter `find_python` found, the install commands run in the
environment's own copy of the project, then codeloop's test tools the project lacks (pytest,
coverage) in a separate directory appended to sys.path. Tests never run here: they run in the
sandbox, with no network.

The cache (`store.py`) lives in `settings.cache_dir`, one directory per key (recipe, interpreter,
the input files' contents). A build holds the key's file lock, so two processes build once; the
manifest is written last, so a crashed half-build is seen as such and rebuilt, never used. Users
hold a lease (a shared lock) for as long as they use an environment; least-recently-used
eviction past `max_size_mb` skips leased ones.

In the sandbox (`sandbox.runtime`, `sandbox.bundle`): the environment's directory and its base
interpreter's installation are shown read-only, its bin first on PATH, VIRTUAL_ENV set, and the
workspace is shown (read-write) at the environment's project path as well, so an editable install
made at build time imports the workspace under test. The process backend, which has no mounts,
puts the workspace's import roots first on PYTHONPATH instead.
"""

from sandbox.environments.detect import detect_recipe, resolve_recipe
from sandbox.environments.environment import Environment, EnvironmentInfo
from sandbox.environments.opening import open_environment
from sandbox.environments.pythons import Interpreter, find_python
from sandbox.environments.recipe import DEFAULT_TOOLS, Recipe, RecipeKind
from sandbox.environments.settings import EnvironmentSettings, build_variables
from sandbox.environments.store import EnvironmentStore, Lease, Progress

__all__ = [
    "DEFAULT_TOOLS",
    "Environment",
    "EnvironmentInfo",
    "EnvironmentSettings",
    "EnvironmentStore",
    "Interpreter",
    "Lease",
    "Progress",
    "Recipe",
    "RecipeKind",
    "build_variables",
    "detect_recipe",
    "find_python",
    "open_environment",
    "resolve_recipe",
]
