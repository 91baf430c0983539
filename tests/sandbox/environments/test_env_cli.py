"""`codeloop env show|build|clean` through the real command line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox.environments.conftest import write


def codeloop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codeloop", *args], capture_output=True, text=True, timeout=600
    )


def test_show_says_a_project_with_nothing_to_install_has_no_environment(tmp_path: Path) -> None:
    write(tmp_path, {"mod.py": "X = 1\n", "test_mod.py": "def test_x():\n    pass\n"})
    done = codeloop("env", "show", "--repo", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recipe"] is None


@pytest.mark.slow
def test_build_then_show_then_clean(tmp_path: Path) -> None:
    """Our CLI: show names the recipe and its files before a build; build reports progress on
    stderr and the environment on stdout; clean removes it."""
    write(tmp_path, {"requirements.txt": "six\n"})
    shown = json.loads(codeloop("env", "show", "--repo", str(tmp_path), "--json").stdout)
    assert (shown["recipe"]["kind"], shown["recipe"]["inputs"][0], shown["built"]) == (
        "requirements",
        "requirements.txt",
        False,
    )
    built = codeloop("env", "build", "--repo", str(tmp_path), "--json")
    assert built.returncode == 0, built.stderr
    assert "uv pip install -r requirements.txt" in built.stderr
    info = json.loads(built.stdout)["info"]
    assert (info["key"], info["built"]) == (shown["key"], True)
    again = json.loads(codeloop("env", "show", "--repo", str(tmp_path), "--json").stdout)
    assert again["built"] is True and again["environment"]["size_bytes"] > 0
    cleaned = json.loads(codeloop("env", "clean", "--repo", str(tmp_path), "--json").stdout)
    assert cleaned["removed"] == [shown["key"]]
    assert json.loads(codeloop("env", "show", "--repo", str(tmp_path), "--json").stdout)["built"] is False


def test_a_missing_python_is_env_setup_naming_how_to_install_it(tmp_path: Path) -> None:
    write(tmp_path, {".python-version": "2.5\n", "requirements.txt": "six\n"})
    done = codeloop("env", "show", "--repo", str(tmp_path))
    assert done.returncode == 1
    assert (
        "env.setup" in done.stderr
        and "pyenv install 2.5" in done.stderr
        and "uv python install 2.5" in done.stderr
    )
