"""Layered environments (`Recipe.base`): a layer over a built environment sees its packages,
installs into itself only, is shared by projects whose inputs are equal, and is leased with its
parent, which is never removed under it."""

import os
import subprocess
from pathlib import Path

import anyio
import pytest

from sandbox.backend import BackendChoice, open_sandbox
from sandbox.environments import EnvironmentSettings, EnvironmentStore, Recipe
from sandbox.errors import RecipeInvalid
from sandbox.limits import SandboxLimits
from tests.sandbox.environments.conftest import needs_gvisor, pyproject, write

pytestmark = [pytest.mark.anyio]
LIMITS = SandboxLimits(timeout_s=120, memory_mb=1024)
PARENT = Recipe(
    kind="custom",
    source="parent: iniconfig 1.1.1",
    install=("python -m pip install -r requirements.txt",),
    inputs=("requirements.txt",),
    tools=(),
)
SHOW = (
    "import importlib.metadata as m, layered, six; "
    "print(m.version('iniconfig'), layered.VALUE, layered.__file__.endswith('/src/layered/__init__.py'))"
)


def _layer(parent_key: str, **changes: object) -> Recipe:
    fields: dict[str, object] = {
        "kind": "custom",
        "source": "layer",
        "base": parent_key,
        "install": ("python -m pip install -e .",),
        "inputs": ("pyproject.toml",),
        "tools": (),
    }
    return Recipe.model_validate(fields | changes)


def _layered_project(root: Path) -> Path:
    """A project that wants a newer iniconfig than the parent has, one more dependency, and a
    console script."""
    extra = '[project.scripts]\nlayered-hello = "layered:hello"\n'
    return write(
        root,
        {
            "pyproject.toml": pyproject("layered", deps='"iniconfig==2.0.0", "six"', extra=extra),
            "src/layered/__init__.py": "VALUE = 1\n\ndef hello():\n    print('hello', VALUE)\n",
        },
    )


@pytest.fixture(scope="module")
def parent_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("parent"), {"requirements.txt": "iniconfig==1.1.1\n"})


def _host_python(python: Path, code: str) -> str:
    """Runs our own snippet (never a project's code) with an environment's interpreter on the host."""
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("gvisor", marks=needs_gvisor), "process"])
async def test_a_layer_sees_its_parent_installs_into_itself_and_runs_the_workspace(
    tmp_path: Path, settings: EnvironmentSettings, parent_project: Path, backend: BackendChoice
) -> None:
    store = EnvironmentStore(settings)
    workspace = _layered_project(tmp_path / "workspace")
    with anyio.fail_after(600):
        async with store.use(PARENT, parent_project) as parent:
            async with store.use(_layer(parent.environment.key), workspace) as lease:
                layer = lease.environment
                # The workspace under test changes after the build: that change is what runs.
                (workspace / "src" / "layered" / "__init__.py").write_text(
                    "VALUE = 2\n\ndef hello():\n    print('hello', VALUE)\n"
                )
                async with open_sandbox(workspace, limits=LIMITS, backend=backend, environment=layer) as box:
                    shown = await box.exec(["python", "-c", SHOW])
                    script = await box.exec(["layered-hello"])
                    write_parent = await box.exec(["sh", "-c", f"touch {parent.environment.venv}/x"])
    assert layer.base is not None and layer.base.key == parent.environment.key
    assert layer.python_version == parent.environment.python_version
    assert (shown.exit_code, shown.stdout) == (0, "2.0.0 2 True\n"), shown.stderr
    assert (script.exit_code, script.stdout) == (0, "hello 2\n"), script.stderr
    if backend == "gvisor":
        assert write_parent.exit_code != 0, "the parent environment must be read-only in the sandbox"
    # The parent kept its own iniconfig and got nothing of the layer's.
    parent_python = parent.environment.python
    assert (
        _host_python(parent_python, "import importlib.metadata as m; print(m.version('iniconfig'))")
        == "1.1.1"
    )
    assert "ModuleNotFoundError" in _host_python(parent_python, "import six")


@pytest.mark.slow
async def test_projects_with_equal_inputs_share_a_layer_and_an_edited_input_makes_another(
    tmp_path: Path, settings: EnvironmentSettings, parent_project: Path
) -> None:
    store = EnvironmentStore(settings)
    first = _layered_project(tmp_path / "first")
    second = _layered_project(tmp_path / "second")
    (second / "src" / "layered" / "other.py").write_text("OTHER = 1\n")  # not an input
    third = _layered_project(tmp_path / "third")
    (third / "pyproject.toml").write_text((third / "pyproject.toml").read_text() + "\n# edited\n")
    with anyio.fail_after(600):
        parent, _ = await store.ensure(PARENT, parent_project)
        recipe = _layer(parent.key)
        one, _ = await store.ensure(recipe, first)
        two, built_two = await store.ensure(recipe, second)
        three, built_three = await store.ensure(recipe, third)
    assert (two.key, built_two) == (one.key, False)
    assert three.key != one.key and built_three


async def test_a_layer_over_an_environment_not_in_the_cache_is_refused(
    tmp_path: Path, env_cache: Path
) -> None:
    store = EnvironmentStore(EnvironmentSettings(cache_dir=tmp_path / "cache", index_date=None))
    with pytest.raises(RecipeInvalid, match="is not in the cache"):
        await store.ensure(_layer("0123456789abcdef", install=()), tmp_path)


def _empty(name: str, **changes: object) -> Recipe:
    fields: dict[str, object] = {
        "kind": "custom",
        "source": name,
        "tools": (),
        "copy_project": False,
        "key_extra": {"name": name},
    }
    return Recipe.model_validate(fields | changes)


@pytest.mark.slow  # builds environments
async def test_a_parent_is_never_removed_under_a_live_layer_and_goes_with_its_layers(tmp_path: Path) -> None:
    settings = EnvironmentSettings(
        cache_dir=tmp_path / "cache", max_size_mb=1, index_date=None, build_env=dict(os.environ)
    )
    store = EnvironmentStore(settings)
    with anyio.fail_after(300):
        async with store.use(_empty("parent"), tmp_path) as parent:
            parent_key = parent.environment.key
            layer_recipe = _empty("layer", base=parent_key)
            # The parent's own lease ends here; the layer's use keeps it leased.
        async with store.use(layer_recipe, tmp_path) as layer:
            assert store.in_use(parent_key), "a layer in use must hold its parent's lease"
            assert not store.remove(parent_key)
            # Past the size limit, eviction spares both.
            await store.ensure(_empty("other"), tmp_path)
            assert {parent_key, layer.environment.key} <= {env.key for env in store.environments()}
        assert store.children(parent_key) == [layer.environment.key]
        assert store.remove(parent_key)
    assert store.load(parent_key) is None and store.load(layer.environment.key) is None
