"""Real builds from the package index, used in real sandboxes: what each kind of project gets, and
that the workspace under test — not the build's copy — is what runs."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from sandbox.backend import BackendChoice, open_sandbox
from sandbox.environments import (
    EnvironmentSettings,
    EnvironmentStore,
    Recipe,
    build_variables,
    open_environment,
)
from sandbox.environments.pythons import pyenv_versions_dir
from sandbox.errors import BuildFailed, EnvironmentSetupError
from sandbox.limits import SandboxLimits
from tests.sandbox.environments.conftest import GVISOR, needs_gvisor, pyproject, write

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
BACKENDS = [pytest.param("gvisor", marks=needs_gvisor), "process"]
LIMITS = SandboxLimits(timeout_s=120, memory_mb=1024)
TEST_USES_DEPENDENCY = """\
    import iniconfig

    def test_dependency_is_installed():
        assert iniconfig.__name__ == "iniconfig"
    """


async def _run(
    project: Path, settings: EnvironmentSettings, argv: list[str], *, backend: BackendChoice = "process"
) -> tuple:
    """Opens `project`'s environment and a sandbox on it; runs `argv`; returns (result, lease info)."""
    with anyio.fail_after(600):
        async with open_environment(project, settings) as lease:
            assert lease is not None, "a recipe was expected"
            async with open_sandbox(
                project, limits=LIMITS, backend=backend, environment=lease.environment
            ) as box:
                return await box.exec(argv), lease.info


@pytest.fixture(scope="module")
def requirements_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reqs")
    return write(
        root,
        {
            "requirements.txt": "six\n",
            "requirements-dev.txt": "-r requirements.txt\niniconfig\n",
            "tests/test_dep.py": TEST_USES_DEPENDENCY,
            "tests/test_network.py": """\
                import socket

                def test_an_outside_address_is_unreachable():
                    # TEST-NET-1 (RFC 5737): never routed; inside the sandbox there is no network at all.
                    socket.create_connection(("192.0.2.1", 80), timeout=5)
                """,
        },
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_requirements_dev_project_runs_its_tests_with_its_dependencies(
    requirements_project: Path, settings: EnvironmentSettings, backend: BackendChoice
) -> None:
    """The README's promise: `python -m pytest` in the sandbox finds the project's dependencies
    (installed from requirements-dev.txt) and pytest (codeloop's test tools, the project lacking it)."""
    argv = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_dep.py"]
    result, info = await _run(requirements_project, settings, argv, backend=backend)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert info.kind == "requirements" and "requirements-dev.txt" in info.source


@needs_gvisor
async def test_tests_never_reach_the_network_though_the_build_reached_the_index(
    requirements_project: Path, settings: EnvironmentSettings
) -> None:
    """Building may reach the package index (six came from it); the tests run with no network."""
    argv = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_network.py"]
    result, info = await _run(requirements_project, settings, argv, backend="gvisor")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout and "OSError" in result.stdout
    six = await _run(
        requirements_project, settings, ["python", "-c", "import six; print(six.__file__)"], backend="gvisor"
    )
    assert six[0].stdout.startswith(str(settings.cache_dir / info.key / "venv"))


@needs_gvisor
async def test_a_command_cannot_write_into_the_environment(
    requirements_project: Path, settings: EnvironmentSettings
) -> None:
    """Read-only: one task can never change the environment another uses."""
    result, info = await _run(
        requirements_project, settings, ["python", "-m", "pip", "uninstall", "-y", "six"], backend="gvisor"
    )
    assert result.exit_code != 0
    assert (settings.cache_dir / info.key / "venv").is_dir()
    again, _ = await _run(requirements_project, settings, ["python", "-c", "import six"], backend="gvisor")
    assert again.exit_code == 0, again.stderr


async def test_a_uv_lock_project_is_synced_from_its_lock(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    import uv

    project = write(tmp_path, {"pyproject.toml": pyproject("locked", deps='"six"'), "locked/__init__.py": ""})
    await anyio.run_process([uv.find_uv_bin(), "lock", "--directory", str(project)])
    result, info = await _run(project, settings, ["python", "-c", "import six, locked; print('ok')"])
    assert (info.kind, result.exit_code, result.stdout) == ("uv", 0, "ok\n"), result.stderr


async def test_a_setup_cfg_project_with_test_extras(tmp_path: Path, settings: EnvironmentSettings) -> None:
    project = write(
        tmp_path,
        {
            "setup.cfg": "[metadata]\nname = cfgproj\nversion = 0.1\n[options]\npackages = cfgproj\n"
            "install_requires = six\n[options.extras_require]\ntest = iniconfig\n",
            "setup.py": "from setuptools import setup\nsetup()\n",
            "cfgproj/__init__.py": "VALUE = 'cfg'\n",
        },
    )
    result, info = await _run(
        project, settings, ["python", "-c", "import six, iniconfig, cfgproj; print(cfgproj.VALUE)"]
    )
    assert (info.kind, result.exit_code, result.stdout) == ("setup", 0, "cfg\n"), result.stderr


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_patched_workspace_is_imported_not_the_build_copy(
    tmp_path: Path, settings: EnvironmentSettings, backend: BackendChoice
) -> None:
    """An editable install points at the build's copy; the sandbox makes the workspace under test
    what is imported (gVisor: shown at the project path; process: its import roots first)."""
    extras = '[project.optional-dependencies]\ntest = ["iniconfig"]\n'
    files = {
        "pyproject.toml": pyproject("srcpkg", extra=extras),
        "src/srcpkg/__init__.py": "VALUE = 'built'\n",
    }
    built_tree = write(tmp_path / "built", files)
    async with open_environment(built_tree, settings) as lease:
        assert lease is not None and lease.environment.import_roots == ("src",)
        workspace = tmp_path / "workspace"
        shutil.copytree(built_tree, workspace)
        (workspace / "src" / "srcpkg" / "__init__.py").write_text("VALUE = 'patched'\n")
        (workspace / "elsewhere").mkdir()
        async with open_sandbox(
            workspace, limits=LIMITS, backend=backend, environment=lease.environment
        ) as box:
            result = await box.exec(["python", "-c", "import srcpkg; print(srcpkg.VALUE)"], cwd="elsewhere")
    assert (result.exit_code, result.stdout) == (0, "patched\n"), result.stderr


@needs_gvisor
async def test_requires_python_3_9_runs_the_tests_under_3_9(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    versions = pyenv_versions_dir()
    if versions is None or not any(versions.glob("3.9*/bin/python")):
        pytest.skip("no Python 3.9 on this machine (pyenv install 3.9)")
    project = write(
        tmp_path,
        {
            "pyproject.toml": pyproject("old", deps='"six"', requires=">=3.9,<3.10"),
            "old/__init__.py": "",
            "tests/test_version.py": "import sys\n\ndef test_v():\n    assert sys.version_info[:2] == (3, 9)\n",
        },
    )
    argv = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result, info = await _run(project, settings, argv, backend="gvisor")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert info.python_version.startswith("3.9.")


async def test_the_projects_own_virtualenv_is_used_read_only_without_a_build(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    project = write(tmp_path, {"requirements.txt": "six\n"})
    await anyio.run_process([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")])
    backend = "gvisor" if GVISOR else "process"
    result, info = await _run(
        project, settings, ["python", "-c", "import sys; print(sys.prefix)"], backend=backend
    )
    assert (info.kind, info.built, result.stdout.strip()) == ("venv", False, str(project / ".venv"))


async def test_the_environment_settings_override_the_projects_files(tmp_path: Path, env_cache: Path) -> None:
    project = write(tmp_path, {"requirements.txt": "six\n"})
    settings = EnvironmentSettings(
        cache_dir=env_cache,
        install=("uv pip install iniconfig",),
        index_date=None,
        build_env=build_variables(os.environ),
    )
    result, info = await _run(project, settings, ["python", "-c", "import iniconfig\nimport six"])
    assert info.kind == "configured"
    assert "No module named 'six'" in result.stderr


async def test_a_dependency_missing_from_the_index_is_env_setup_naming_it(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    project = write(tmp_path, {"requirements.txt": "codeloop-no-such-package-4f9a2c\n"})
    with pytest.raises(BuildFailed) as raised:
        async with open_environment(project, settings):
            pass
    error = raised.value
    assert isinstance(error, EnvironmentSetupError) and error.failure_class == "env.setup"
    assert error.missing == "codeloop-no-such-package-4f9a2c"
    assert error.step == "uv pip install -r requirements.txt"
    assert "codeloop-no-such-package-4f9a2c" in str(error) and error.log_tail


async def test_a_crashed_half_build_is_rebuilt_not_used(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    recipe = Recipe(kind="custom", source="test", tools=(), key_extra={"test": str(tmp_path)})
    store = EnvironmentStore(settings)
    key = store.key(recipe, tmp_path)
    write(settings.cache_dir / key, {"venv/half-written": "crashed here\n"})
    environment, built = await store.ensure(recipe, tmp_path)
    assert built and environment.key == key
    assert not (settings.cache_dir / key / "venv" / "half-written").exists()
    assert (await store.ensure(recipe, tmp_path)) == (environment, False)


CONCURRENT = """
import anyio, os, sys
from pathlib import Path
from sandbox.environments import EnvironmentSettings, EnvironmentStore, Recipe
settings = EnvironmentSettings(cache_dir=Path(sys.argv[1]), build_env=dict(os.environ), index_date=None)
recipe = Recipe(kind="custom", source="test", tools=(), key_extra={"test": sys.argv[2]})
env, built = anyio.run(lambda: EnvironmentStore(settings).ensure(recipe, Path(sys.argv[2])))
print(built)
"""


def test_two_processes_wanting_the_same_environment_build_it_once(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    argv = [sys.executable, "-c", CONCURRENT, str(settings.cache_dir), str(tmp_path)]
    first, second = (subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(2))
    outputs = sorted(p.communicate(timeout=300)[0].strip() for p in (first, second))
    assert (first.returncode, second.returncode) == (0, 0)
    assert outputs == ["False", "True"]


async def test_eviction_removes_the_least_recently_used_but_never_one_in_use(
    tmp_path: Path, env_cache: Path
) -> None:
    settings = EnvironmentSettings(cache_dir=tmp_path / "cache", max_size_mb=1, index_date=None)
    store = EnvironmentStore(settings)

    def recipe(name: str) -> Recipe:
        return Recipe(kind="custom", source=name, tools=(), key_extra={"name": name})

    async with store.use(recipe("a"), tmp_path) as held:
        await store.ensure(recipe("b"), tmp_path)
        assert store.load(held.environment.key) is not None, "an environment in use was evicted"
    b_key = store.key(recipe("b"), tmp_path)
    await store.ensure(recipe("c"), tmp_path)
    remaining = {env.key for env in store.environments()}
    assert remaining == {store.key(recipe("c"), tmp_path)}
    assert held.environment.key not in remaining and b_key not in remaining


async def test_the_retrievers_example_runs_use_the_projects_environment(
    requirements_project: Path, settings: EnvironmentSettings
) -> None:
    """An issue's example code imports the project's dependencies: it runs in the environment."""
    from tool_servers.search.examples.run import trace_examples

    with anyio.fail_after(600):
        run = await trace_examples(
            requirements_project,
            ["tests/test_dep.py"],
            ["import iniconfig\nprint(iniconfig.__name__)\n"],
            backend="gvisor" if GVISOR else "process",
            environment=settings,
        )
    assert run.note is None and run.raised == [] and run.failed == 0, run
    assert run.python.startswith(str(settings.cache_dir))  # pyright: ignore[reportOptionalMemberAccess] - an environment's run names its python


@needs_gvisor
async def test_build_products_are_shown_at_the_project_path_but_never_reach_the_workspace(
    tmp_path: Path, settings: EnvironmentSettings
) -> None:
    """A file the install generates (as setuptools_scm's _version.py) is importable through the
    editable install, while the host workspace never gets it."""
    files = {"pyproject.toml": pyproject("genpkg"), "src/genpkg/__init__.py": "VALUE = 1\n"}
    project = write(tmp_path / "project", files)
    generate = "echo 'GENERATED = 7' > src/genpkg/_generated.py"
    recipe = Recipe(
        kind="custom", source="test", install=("uv pip install -e .", generate), inputs=("pyproject.toml",)
    )
    async with EnvironmentStore(settings).use(recipe, project) as lease:
        assert "src/genpkg/_generated.py" in lease.environment.build_products
        async with open_sandbox(
            project, limits=LIMITS, backend="gvisor", environment=lease.environment
        ) as box:
            result = await box.exec(
                ["python", "-c", "from genpkg import _generated; print(_generated.GENERATED)"]
            )
            await box.exec(["sh", "-c", "echo changed > src/genpkg/__init__.py.bak"])
    assert (result.exit_code, result.stdout) == (0, "7\n"), result.stderr
    assert not (project / "src" / "genpkg" / "_generated.py").exists()
    assert (project / "src" / "genpkg" / "__init__.py.bak").read_text() == "changed\n"
