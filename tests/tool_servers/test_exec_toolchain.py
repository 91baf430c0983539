"""Which interpreter runs a project's tests: the project's own when it has pytest installed, in
whichever shape an install leaves it; codeloop's only when the project has none."""

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sandbox.environments.environment import Environment
from sandbox.environments.recipe import Recipe
from tool_servers.exec.shared_sandbox import find_toolchain, has_pytest


def _venv(root: Path, *entries: str) -> Path:
    """A virtualenv at `root/.venv` whose site-packages holds `entries` (a trailing `/` makes a
    directory, `pkg/__init__.py` a package)."""
    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = venv / "lib" / "python3.9" / "site-packages"
    site.mkdir(parents=True)
    for entry in entries:
        path = site / entry
        if entry.endswith("/"):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    return venv


@pytest.mark.parametrize(
    "entries",
    [
        pytest.param(("pytest/__init__.py", "pytest-8.3.0.dist-info/"), id="a package from a wheel"),
        # pytest's own repository installed to test itself: the code stays in the project.
        pytest.param(("__editable__.pytest-4.6.0.pth", "pytest-4.6.0.dist-info/"), id="editable"),
        pytest.param(("pytest.egg-link",), id="an old editable install"),
        pytest.param(("pytest.py", "pytest-3.1.3.egg-info/"), id="an old single-module pytest"),
    ],
)
def test_a_project_with_pytest_in_any_installed_shape_runs_its_tests_with_its_own_interpreter(
    tmp_path: Path, entries: tuple[str, ...]
) -> None:
    venv = _venv(tmp_path, *entries)
    assert has_pytest(venv)
    toolchain = find_toolchain(tmp_path)
    assert toolchain.test_python == str(venv / "bin" / "python")
    assert not toolchain.warm_tests  # the warm interpreter is codeloop's own, never the project's


def test_a_project_with_only_a_pytest_plugin_installed_runs_its_tests_with_codeloops_pytest(
    tmp_path: Path,
) -> None:
    venv = _venv(tmp_path, "pytest_cov/__init__.py", "pytest_cov-4.1.0.dist-info/", "pytest_asyncio/")
    assert not has_pytest(venv)
    toolchain = find_toolchain(tmp_path)
    assert toolchain.python == str(venv / "bin" / "python")
    assert toolchain.test_python == sys.executable


def _environment(root: Path, *entries: str, base: Environment | None = None) -> Environment:
    venv = _venv(root, *entries)
    return Environment(
        key=root.name,
        recipe=Recipe(kind="configured", source="test"),
        path=root,
        venv=venv,
        python=venv / "bin" / "python",
        python_version="3.9.18",
        base_prefix=Path("/usr"),
        built_at=datetime.now(UTC),
        build_s=0.0,
        size_bytes=0,
        base=base,
    )


def test_a_layer_over_an_environment_with_pytest_runs_its_tests_with_its_own_interpreter(
    tmp_path: Path,
) -> None:
    """A layered environment sees its parent's site-packages: pytest there is the layer's too."""
    parent = _environment(tmp_path / "parent", "pytest/__init__.py", "pytest-7.4.0.dist-info/")
    layer = _environment(tmp_path / "layer", "six.py", base=parent)
    toolchain = find_toolchain(tmp_path / "workspace", layer)
    assert toolchain.test_python == str(layer.python)
    assert not toolchain.warm_tests
