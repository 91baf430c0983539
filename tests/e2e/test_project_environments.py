"""`codeloop run` tests a repository in its project environment: the `[environment]` of its
`codeloop.toml` decides the recipe, the scratch workspace resolves requirements as of the date
the checkout last changed them, and a second task on the same tree builds nothing."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
REPO_ROOT = Path(__file__).parents[2]
DEPENDENCY_DATE = "2023-06-01T12:00:00+00:00"
"""iniconfig 2.0.0 (January 2023) was the newest then; 2.1.0 came in 2025."""
FILES = {
    "codeloop.toml": """\
        [environment]
        install = [
            "uv pip install -r requirements.txt",
            "python -c \\"import pathlib, site; pathlib.Path(site.getsitepackages()[0], 'configured_marker.py').write_text('VALUE = 42')\\"",
        ]
        """,
    "requirements.txt": "iniconfig\n",
    "tests/test_environment.py": """\
        from importlib.metadata import version

        import configured_marker


        def test_the_configured_install_ran():
            assert configured_marker.VALUE == 42


        def test_requirements_resolve_as_of_their_last_commit():
            assert version("iniconfig") == "2.0.0"
        """,
    "README.md": "# marker\n\nThe configured environment's marker module.\n",
}


def _git(repo: Path, *args: str, date: str | None = None) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _repository(root: Path) -> Path:
    """The files, their dependency files committed on DEPENDENCY_DATE and the rest today."""
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "codeloop.toml", "requirements.txt")
    _git(root, "commit", "-qm", "dependencies", date=DEPENDENCY_DATE)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "tests")
    return root


def _codeloop(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codeloop", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
    )


def _diagnose(env: dict[str, str], repo: Path) -> dict[str, Any]:
    done = _codeloop(env, "run", "check the tests", "--repo", str(repo), "--mode", "execute", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_configured_environment_serves_two_tasks_on_the_same_tree_and_is_built_once(
    tmp_path: Path,
) -> None:
    """The environments issue: `[environment] install` replaces detection; the second task's
    run_tests result says `built: false`; the key is the one `codeloop env show` gives the
    checkout, so the scratch workspace dated its requirements as the checkout does."""
    repo = _repository(tmp_path / "repo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    env |= {"CODELOOP_HOME": str(tmp_path / "home"), "CODELOOP_CACHE_DIR": str(tmp_path / "cache")}

    first = _diagnose(env, repo)
    assert first["status"] == "diagnosed", first["report"]
    verification = first["verification"]
    assert verification["failures"] == [], verification
    assert any(c["ok"] and c["summary"].startswith("2 passed") for c in verification["checks"]), verification
    environment = verification["environment"]
    assert environment["kind"] == "configured" and environment["source"] == "[environment] in codeloop.toml"
    assert environment["built"] is True

    shown = _codeloop(env, "env", "show", "--repo", str(repo), "--json")
    assert shown.returncode == 0, shown.stderr
    checkout = json.loads(shown.stdout)
    assert checkout["recipe"]["index_date"] == DEPENDENCY_DATE
    assert checkout["key"] == environment["key"] and checkout["built"] is True

    second = _diagnose(env, repo)
    assert second["verification"]["failures"] == []
    assert second["verification"]["environment"]["key"] == environment["key"]
    assert second["verification"]["environment"]["built"] is False
