"""Recipe detection on small real projects: which files decide, what is installed, what is hashed."""

import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.environments import EnvironmentSettings, Recipe, detect_recipe, resolve_recipe
from sandbox.environments.detect import inputs_commit_date
from sandbox.environments.key import environment_key
from sandbox.environments.pythons import running_interpreter
from sandbox.errors import RecipeInvalid
from tests.sandbox.environments.conftest import pyproject, write


def test_uv_lock_is_synced_frozen(tmp_path: Path) -> None:
    """Our design: a uv.lock is the most specific description; `uv sync --frozen` installs it."""
    project = write(
        tmp_path, {"pyproject.toml": pyproject("locked", deps='"six"'), "uv.lock": "version = 1\n"}
    )
    recipe = detect_recipe(project)
    assert recipe is not None
    assert (recipe.kind, recipe.install) == ("uv", ("uv sync --frozen",))
    assert {"uv.lock", "pyproject.toml"} <= set(recipe.inputs)


def test_requirements_dev_project_installs_both_files_and_hashes_their_includes(tmp_path: Path) -> None:
    """requirements.txt plus its dev variant; a file they include (-r) is an input too."""
    project = write(
        tmp_path,
        {
            "requirements.txt": "six\n",
            "requirements-dev.txt": "-r requirements.txt\n-c constraints.txt\niniconfig\n",
            "constraints.txt": "iniconfig<3\n",
        },
    )
    recipe = detect_recipe(project)
    assert recipe is not None and recipe.kind == "requirements"
    assert recipe.install == ("uv pip install -r requirements.txt", "uv pip install -r requirements-dev.txt")
    assert {"requirements.txt", "requirements-dev.txt", "constraints.txt"} <= set(recipe.inputs)


def test_requirements_folder_takes_the_test_file_then_the_project(tmp_path: Path) -> None:
    """Flask's layout: requirements/tests.txt (not the -min variant), then the project itself."""
    project = write(
        tmp_path,
        {
            "pyproject.toml": pyproject("flasklike", deps='"six"'),
            "requirements/tests.txt": "iniconfig\n",
            "requirements/tests-pallets-min.txt": "six==1.0\n",
            "requirements/docs.txt": "sphinx\n",
        },
    )
    recipe = detect_recipe(project)
    assert recipe is not None
    assert recipe.install == ("uv pip install -r requirements/tests.txt", "uv pip install -e .")


def test_test_extras_of_pyproject_are_installed_with_the_project(tmp_path: Path) -> None:
    project = write(
        tmp_path,
        {
            "pyproject.toml": pyproject(
                "extras", extra='[project.optional-dependencies]\ntest = ["iniconfig"]\n'
            )
        },
    )
    recipe = detect_recipe(project)
    assert recipe is not None
    assert (recipe.kind, recipe.install) == ("pyproject", ("uv pip install -e '.[test]'",))


def test_pep_735_groups_are_expanded_into_their_requirements(tmp_path: Path) -> None:
    groups = '[dependency-groups]\ntest = ["iniconfig", {include-group = "lint"}]\nlint = ["six"]\n'
    project = write(tmp_path, {"pyproject.toml": pyproject("grouped", deps='"six"', extra=groups)})
    recipe = detect_recipe(project)
    assert recipe is not None
    assert recipe.install == ("uv pip install -e .", "uv pip install iniconfig six")


def test_setup_cfg_test_extras(tmp_path: Path) -> None:
    project = write(
        tmp_path,
        {
            "setup.cfg": "[metadata]\nname = cfgproj\n[options]\ninstall_requires = six\n"
            "[options.extras_require]\ntesting = iniconfig\n",
            "setup.py": "from setuptools import setup\nsetup()\n",
        },
    )
    recipe = detect_recipe(project)
    assert recipe is not None
    assert (recipe.kind, recipe.install) == ("setup", ("uv pip install -e '.[testing]'",))


def test_tox_deps_without_factor_lines(tmp_path: Path) -> None:
    project = write(
        tmp_path, {"tox.ini": "[testenv]\ndeps =\n    iniconfig\n    min: six==1.0\ncommands = pytest\n"}
    )
    recipe = detect_recipe(project)
    assert recipe is not None
    assert (recipe.kind, recipe.install) == ("tox", ("uv pip install iniconfig",))


def test_a_project_with_nothing_to_install_keeps_codeloops_interpreter(tmp_path: Path) -> None:
    """No dependencies and a Python the running interpreter satisfies: no environment to build."""
    project = write(tmp_path, {"pyproject.toml": pyproject("bare", requires=">=3.8"), "bare.py": "X = 1\n"})
    assert detect_recipe(project) is None


def test_python_version_file_asks_for_its_version(tmp_path: Path) -> None:
    project = write(tmp_path, {".python-version": "3.9\n", "requirements.txt": "six\n"})
    recipe = detect_recipe(project)
    assert recipe is not None and recipe.python == "3.9" and ".python-version" in recipe.inputs


def test_a_working_virtualenv_of_the_project_is_used_as_it_is(tmp_path: Path) -> None:
    """Our design: the project's own .venv (a working interpreter) comes first; nothing is built."""
    write(tmp_path, {"requirements.txt": "six\n"})
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True)
    recipe = detect_recipe(tmp_path)
    assert recipe is not None and (recipe.kind, recipe.venv, recipe.install) == ("venv", ".venv", ())


def test_a_broken_virtualenv_is_not_used(tmp_path: Path) -> None:
    write(tmp_path, {"requirements.txt": "six\n", ".venv/pyvenv.cfg": "home = /nonexistent\n"})
    (tmp_path / ".venv" / "bin").mkdir()
    (tmp_path / ".venv" / "bin" / "python").symlink_to("/nonexistent/python3")
    recipe = detect_recipe(tmp_path)
    assert recipe is not None and recipe.kind == "requirements"


def test_environment_settings_override_detection(tmp_path: Path) -> None:
    """`[environment]` install and python replace what the files say; the files stay inputs."""
    project = write(tmp_path, {"requirements.txt": "six\n", "ci/reqs.txt": "iniconfig\n"})
    settings = EnvironmentSettings(
        cache_dir=tmp_path / "cache", python="3.9", install=("pip install -r ci/reqs.txt",)
    )
    recipe = resolve_recipe(project, settings)
    assert recipe is not None
    assert (recipe.kind, recipe.python, recipe.install) == (
        "configured",
        "3.9",
        ("pip install -r ci/reqs.txt",),
    )
    assert {"ci/reqs.txt", "requirements.txt"} <= set(recipe.inputs)


def test_disabled_settings_mean_no_environment(tmp_path: Path) -> None:
    project = write(tmp_path, {"requirements.txt": "six\n"})
    assert resolve_recipe(project, EnvironmentSettings(cache_dir=tmp_path / "c", enabled=False)) is None


def test_an_unreadable_pyproject_is_named(tmp_path: Path) -> None:
    project = write(tmp_path, {"pyproject.toml": "[project\nname="})
    with pytest.raises(RecipeInvalid, match="pyproject.toml"):
        detect_recipe(project)


def test_the_key_follows_the_input_files_and_nothing_else(tmp_path: Path) -> None:
    """Keyed by the recipe and the dependency files it reads: editing code keeps the key."""
    project = write(tmp_path, {"requirements.txt": "six\n", "mod.py": "X = 1\n"})
    recipe = detect_recipe(project)
    assert recipe is not None
    python = running_interpreter()
    first = environment_key(recipe, python, project)
    (project / "mod.py").write_text("X = 2\n")
    assert environment_key(recipe, python, project) == first
    (project / "requirements.txt").write_text("six==1.16.0\n")
    assert environment_key(recipe, python, project) != first
    other = Recipe(**{**recipe.model_dump(), "install": ("uv pip install six",)})
    assert environment_key(other, python, project) != environment_key(recipe, python, project)


def test_an_input_outside_the_project_is_refused(tmp_path: Path) -> None:
    recipe = Recipe(kind="custom", source="test", inputs=("../secret.txt",))
    with pytest.raises(RecipeInvalid, match="inside the project"):
        environment_key(recipe, running_interpreter(), tmp_path)


def test_index_date_is_the_last_commit_of_the_dependency_files(tmp_path: Path) -> None:
    """An old checkout resolves as of its dependency files' last change; an edit to them drops the bound."""
    project = write(tmp_path, {"requirements.txt": "six\n", "mod.py": "X = 1\n"})
    env = {"GIT_COMMITTER_DATE": "2023-02-22T14:00:17+00:00", "GIT_AUTHOR_DATE": "2023-02-22T14:00:17+00:00"}
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "deps"], check=True, env={**env, "PATH": "/usr/bin:/bin"})
    assert inputs_commit_date(project, ("requirements.txt",)) == "2023-02-22T14:00:17+00:00"
    (project / "requirements.txt").write_text("six\niniconfig\n")
    assert inputs_commit_date(project, ("requirements.txt",)) is None
