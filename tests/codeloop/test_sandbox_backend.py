"""`[sandbox] backend`: the user's file chooses the backend (under `CODELOOP_SANDBOX`); a
repository's own configuration may ask for a stronger sandbox for the code it brings, and a
weaker one is refused at submission, with what to do."""

import json
import os
from pathlib import Path

import pytest

from codeloop.config.environment import tool_server_config
from codeloop.config.errors import ConfigError
from codeloop.config.sandbox_limits import workspace_sandbox_policy
from codeloop.config.settings import load_settings
from codeloop.testing import make_repo
from tests.support.cli import codeloop
from tests.support.repos import CALC


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user configuration directory of the test's own; no CODELOOP_SANDBOX."""
    config_home = tmp_path / "config"
    (config_home / "codeloop").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.delenv("CODELOOP_SANDBOX", raising=False)
    return config_home / "codeloop"


def _user_backend(user_dir: Path, backend: str) -> None:
    (user_dir / "config.toml").write_text(f'[sandbox]\nbackend = "{backend}"\n')


def _repo(root: Path, backend: str | None) -> Path:
    files = dict(CALC)
    if backend is not None:
        files["codeloop.toml"] = f'[sandbox]\nbackend = "{backend}"\n'
    return make_repo(root, files)


def test_the_user_file_chooses_the_backend_and_the_environment_overrides_it(
    user_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tool_server_config().sandbox_policy == "auto"
    _user_backend(user_dir, "process")
    assert tool_server_config().sandbox_policy == "process"
    monkeypatch.setenv("CODELOOP_SANDBOX", "gvisor")
    assert tool_server_config().sandbox_policy == "gvisor"


def test_a_repository_may_strengthen_the_sandbox(user_dir: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", "gvisor")
    assert load_settings(repo=repo).sandbox.backend == "gvisor"
    assert workspace_sandbox_policy(repo, "auto") == "gvisor"
    assert workspace_sandbox_policy(repo, "process") == "gvisor"
    assert workspace_sandbox_policy(_repo(tmp_path / "plain", None), "process") == "process"


@pytest.mark.parametrize(("user", "asked"), [(None, "process"), ("gvisor", "auto"), ("gvisor", "process")])
def test_a_repository_may_not_weaken_the_sandbox(
    user_dir: Path, tmp_path: Path, user: str | None, asked: str
) -> None:
    if user is not None:
        _user_backend(user_dir, user)
    repo = _repo(tmp_path / "repo", asked)
    with pytest.raises(
        ConfigError, match=rf"codeloop.toml: sandbox.backend = '{asked}' would weaken the sandbox"
    ):
        load_settings(repo=repo)
    # Where the tools are built (a workspace whose file the agents may have edited), it changes nothing.
    assert workspace_sandbox_policy(repo, user or "auto") == (user or "auto")


def test_the_same_backend_as_the_users_is_no_weakening(user_dir: Path, tmp_path: Path) -> None:
    _user_backend(user_dir, "process")
    assert load_settings(repo=_repo(tmp_path / "repo", "process")).sandbox.backend == "process"


def test_run_refuses_a_repository_that_weakens_the_sandbox_before_anything_starts(
    user_dir: Path, tmp_path: Path
) -> None:
    repo = _repo(tmp_path / "repo", "process")
    env = {**os.environ, "CODELOOP_HOME": str(tmp_path / "home")}
    done = codeloop(env, "run", "fix add", "--repo", str(repo), "--mode", "execute")
    assert done.returncode == 2, done.stderr
    assert "sandbox.backend = 'process' would weaken the sandbox ('auto', the default)" in done.stderr
    assert "CODELOOP_SANDBOX=process" in done.stderr
    assert not (tmp_path / "home").exists()  # no serve, no state: refused before anything started


def test_sandbox_exec_runs_in_the_backend_the_user_file_chose(user_dir: Path, tmp_path: Path) -> None:
    _user_backend(user_dir, "process")
    env = {**os.environ, "CODELOOP_HOME": str(tmp_path / "home")}
    done = codeloop(
        env, "sandbox", "exec", "--workspace", str(tmp_path), "--environment", "none", "--json", "--", "true"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["backend"] == "process"
