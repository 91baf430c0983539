"""Shared set-up of the environment tests: one environment cache per test run.

Builds are real (the package index is reached) and cost seconds each, so every test of a run
shares one cache: with pytest-xdist the workers of a run share it too (its directory is beside
their base temporary directories), and the store's build lock makes them build each key once.
"""

import os
import textwrap
from pathlib import Path

import pytest

from sandbox.environments import EnvironmentSettings, build_variables
from sandbox.gvisor import probe_runsc

GVISOR = probe_runsc().works
NO_RUNSC = "runsc does not work here (needs runsc installed and root); see `codeloop doctor`"
needs_gvisor = pytest.mark.skipif(not GVISOR, reason=NO_RUNSC)


@pytest.fixture(scope="session")
def env_cache(shared_cache_root: Path) -> Path:
    """The environments of codeloop's shared test cache (`tests/conftest.py`): what the
    end-to-end tests' `codeloop run` builds (CODELOOP_CACHE_DIR) is found here too."""
    cache = shared_cache_root / "environments"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture(scope="session")
def settings(env_cache: Path) -> EnvironmentSettings:
    return EnvironmentSettings(cache_dir=env_cache, build_env=build_variables(os.environ), index_date=None)


def write(root: Path, files: dict[str, str]) -> Path:
    """Writes `files` (relative path -> text, dedented) under `root`; returns `root`."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


PYPROJECT = """\
    [project]
    name = "{name}"
    version = "0.1"
    requires-python = "{requires}"
    dependencies = [{deps}]
    {extra}
    [build-system]
    requires = ["setuptools>=64"]
    build-backend = "setuptools.build_meta"
    """


def pyproject(name: str, *, deps: str = "", requires: str = ">=3.8", extra: str = "") -> str:
    return PYPROJECT.format(name=name, deps=deps, requires=requires, extra=extra)


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: the sandbox's own tests cover trio; a build twice over would only cost time."""
    return "asyncio"
