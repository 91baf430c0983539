"""The environments issue's acceptance case end to end: `codeloop run @issue.md --repo flask --mode
execute` with no model tests Flask in an environment made from Flask's own files, in gVisor, and
a second task on the same tree pays no build."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox.environments.conftest import needs_gvisor
from tests.sandbox.environments.test_exec_server_environment import _flask_checkout
from tests.support.cli import codeloop

pytestmark = [pytest.mark.slow, needs_gvisor]

ISSUE = """\
Config.from_file cannot load TOML files

`app.config.from_file("config.toml", load=tomllib.load)` fails with `TypeError: File must be opened
in binary mode`: from_file opens the file in text mode, and tomllib.load needs a binary file.
from_file should take a mode argument (text by default) so that binary loaders work.
"""


def _diagnose(env: dict[str, str], issue: Path, repo: Path) -> dict[str, Any]:
    done = codeloop(env, "run", f"@{issue}", "--repo", str(repo), "--mode", "execute", "--json", timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _suite(result: dict[str, Any]) -> dict[str, Any]:
    """The diagnose run's whole-suite check."""
    return next(c for c in result["verification"]["checks"] if c["name"] == "tests")


def test_flask_is_diagnosed_in_its_own_environment_and_the_second_task_builds_nothing(
    tmp_path: Path, shared_cache_root: Path
) -> None:
    """Flask 2.2.5 (src/ layout; tests need Flask installed with Werkzeug, Jinja2 and pytest), from
    its released sdist: the suite's real counts come out, hundreds passing."""
    issue = tmp_path / "issue.md"
    issue.write_text(ISSUE)
    repo = _flask_checkout(tmp_path / "flask")
    env = {k: v for k, v in os.environ.items() if k not in ("CODELOOP_MODEL", "CODELOOP_NATS_URL")}
    env |= {
        "CODELOOP_HOME": str(tmp_path / "home"),
        "CODELOOP_CACHE_DIR": str(shared_cache_root),
        "CODELOOP_SANDBOX": "gvisor",
    }

    first = _diagnose(env, issue, repo)
    assert first["status"] == "diagnosed", first["report"]
    environment = first["verification"]["environment"]
    assert environment["kind"] == "requirements" and "requirements/tests.txt" in environment["source"]
    suite = _suite(first)
    passed = int(suite["summary"].split(" passed", 1)[0])
    assert passed >= 200, suite
    assert not [f for f in first["verification"]["failures"] if f["failure_class"].startswith("env.")]
    assert "src/flask/config.py" in first["context"]["files"][:5]

    second = _diagnose(env, issue, repo)
    assert second["verification"]["environment"]["key"] == environment["key"]
    assert second["verification"]["environment"]["built"] is False
    assert _suite(second)["summary"] == suite["summary"]
