"""`[environment]` in the configuration files: every key reaches the project environment's
settings, the repository's file over the user's, and a mistake is one line naming file and key."""

from pathlib import Path

import pytest

from codeloop.config.errors import ConfigError
from codeloop.config.project_environment import environment_settings, workspace_environment_settings
from codeloop.config.settings import load_settings
from sandbox.environments import resolve_recipe


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user configuration directory (platformdirs follows XDG_CONFIG_HOME) and the cache."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CODELOOP_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "xdg" / "codeloop"
    folder.mkdir(parents=True)
    return folder


def _repo(tmp_path: Path, text: str, name: str = "codeloop.toml") -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / name).write_text(text)
    return repo


def test_every_key_of_the_table_reaches_the_environment_settings(tmp_path: Path, user_dir: Path) -> None:
    """Our contract (docs/environments.md): python, install, index_date, max_size_mb,
    build_timeout_s, python_paths and enabled, with the cache in CODELOOP_CACHE_DIR."""
    repo = _repo(
        tmp_path,
        '[environment]\npython = "3.9"\ninstall = ["pip install -r ci/reqs.txt", "pip install -e ."]\n'
        'index_date = 2023-02-22\nmax_size_mb = 512\nbuild_timeout_s = 90\npython_paths = ["tools/py"]\n'
        "enabled = true\n",
    )
    settings = environment_settings(repo)
    assert settings.python == "3.9"
    assert settings.install == ("pip install -r ci/reqs.txt", "pip install -e .")
    assert settings.index_date == "2023-02-22"
    assert (settings.max_size_mb, settings.build_timeout_s) == (512, 90.0)
    assert settings.python_paths == ((repo / "tools" / "py").resolve(),)
    assert settings.cache_dir == tmp_path / "cache" / "environments"
    recipe = resolve_recipe(repo, settings)
    assert recipe is not None and recipe.kind == "configured"
    assert recipe.install == settings.install and recipe.source == "[environment] in codeloop.toml"
    assert "ci/reqs.txt" in recipe.inputs


def test_the_repositorys_table_wins_over_the_users_and_latest_means_no_date(
    tmp_path: Path, user_dir: Path
) -> None:
    """CONTRACTS "Configuration": project file > user file > defaults, key by key."""
    (user_dir / "config.toml").write_text('[environment]\nmax_size_mb = 100\nindex_date = "latest"\n')
    repo = _repo(tmp_path, "[tool.codeloop.environment]\nenabled = false\n", name="pyproject.toml")
    settings = environment_settings(repo)
    assert (settings.enabled, settings.max_size_mb, settings.index_date) == (False, 100, None)
    assert resolve_recipe(repo, settings) is None
    shown = load_settings(repo=repo).values()
    assert shown["environment.enabled"]["source"] == "project file"
    assert shown["environment.max_size_mb"]["source"] == "user file"
    assert shown["environment.build_timeout_s"] == {"value": 1800.0, "source": "default", "where": None}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[environment]\ninstal = []\n", "line 2: unknown key 'environment.instal'; allowed here: enabled"),
        (
            '[environment]\nmax_size_mb = "big"\n',
            "line 2: environment.max_size_mb: Input should be a valid integer",
        ),
        (
            "[environment]\nbuild_timeout_s = 0\n",
            "line 2: environment.build_timeout_s: Input should be greater than 0",
        ),
        (
            '[environment]\ninstall = "pip install ."\n',
            "line 2: environment.install: Input should be a valid list",
        ),
        (
            '[environment]\nindex_date = "yesterday"\n',
            "line 2: environment.index_date: must be git, latest, or an ISO",
        ),
    ],
)
def test_a_mistake_in_the_table_is_one_line_naming_the_file_and_key(
    tmp_path: Path, user_dir: Path, text: str, expected: str
) -> None:
    """Our choice (docs/configuration.md): the file, the line and the key, and what was expected."""
    repo = _repo(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        environment_settings(repo)
    message = str(raised.value)
    assert message.startswith(f"{repo / 'codeloop.toml'} {expected}") and "\n" not in message


def test_a_workspace_whose_file_no_longer_reads_gets_the_users_settings(
    tmp_path: Path, user_dir: Path
) -> None:
    """Our choice: an agent that breaks a workspace's codeloop.toml does not stop its tools being built."""
    (user_dir / "config.toml").write_text("[environment]\nmax_size_mb = 64\n")
    repo = _repo(tmp_path, "[environment]\nnot_a_key = 1\n")
    settings = workspace_environment_settings(repo)
    assert settings.max_size_mb == 64 and settings.install is None
