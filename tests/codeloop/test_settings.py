"""The configuration: files, environment and flags merged in the contract's order, each value
knowing its source, and every mistake in a file named by file, line and key."""

from pathlib import Path

import pytest

from agents.messages import TaskSubmitted
from codeloop.config.checks import check_submission
from codeloop.config.errors import ConfigError
from codeloop.config.settings import load_settings
from codeloop.config.task_options import TaskOptions

SCRIPT = "def answer(messages, info):\n    return None\n\n\ndef other(messages, info):\n    return None\n"


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user configuration directory (platformdirs follows XDG_CONFIG_HOME), empty of variables."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for variable in ("CODELOOP_MODEL", "CODELOOP_PLANNER_MODEL", "CODELOOP_CODER_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    folder = tmp_path / "xdg" / "codeloop"
    folder.mkdir(parents=True)
    return folder


def _repo(tmp_path: Path, name: str, text: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / "models.py").write_text(SCRIPT)
    (repo / name).write_text(text)
    return repo


def test_each_value_comes_from_the_highest_layer_that_sets_it_and_says_which(
    tmp_path: Path, user_dir: Path
) -> None:
    """CONTRACTS "Configuration": command line > environment > project file > user file > defaults."""
    (user_dir / "config.toml").write_text(
        f'[models]\ndefault = "function:{tmp_path}/repo/models.py:answer"\n[budgets]\nmax_steps = 12\nmax_revisions = 1\n'
    )
    repo = _repo(
        tmp_path,
        "codeloop.toml",
        '[models]\ncoder = ["function:models.py:other", "openai-chat:gpt-4o"]\n'
        '[budgets]\nmax_steps = 7\n[pipelines]\nsecure = ["plan:planner", "review:security-reviewer"]\n',
    )
    answer, other = f"function:{repo}/models.py:answer", f"function:{repo}/models.py:other"
    settings = load_settings(repo=repo, environ={"CODELOOP_PLANNER_MODEL": other})
    values = settings.values()
    assert (settings.models.default, settings.models.planner, settings.models.coder) == (answer, other, other)
    assert settings.models.fallbacks == {"coder": ["openai-chat:gpt-4o"]}
    assert values["models.default"] == {
        "value": answer,
        "source": "user file",
        "where": str(user_dir / "config.toml"),
    }
    assert values["models.coder"]["source"] == "project file" and values["models.coder"]["value"] == [
        other,
        "openai-chat:gpt-4o",
    ]
    assert values["models.planner"] == {
        "value": other,
        "source": "environment",
        "where": "CODELOOP_PLANNER_MODEL",
    }
    assert (settings.budgets.max_steps, values["budgets.max_steps"]["source"]) == (7, "project file")
    assert (settings.budgets.max_revisions, values["budgets.max_revisions"]["source"]) == (1, "user file")
    assert values["budgets.max_tokens"]["source"] == "default"
    assert settings.pipelines == {"secure": ["plan:planner", "review:security-reviewer"]}

    # `--model` sets every role, over a file's role entry (CLI contract); a flag budget over both files.
    flagged = load_settings(repo=repo, flags=TaskOptions(model=answer, max_steps=3).layer(), environ={})
    assert (flagged.models.planner, flagged.models.coder, flagged.budgets.max_steps) == (answer, answer, 3)
    assert flagged.values()["models.coder"]["where"] == "--model"
    assert flagged.models.fallbacks == {}


def test_the_tool_codeloop_table_of_pyproject_is_the_project_file(tmp_path: Path, user_dir: Path) -> None:
    """CONTRACTS: `[tool.codeloop]` in the repository's pyproject.toml, when it has no codeloop.toml."""
    repo = _repo(
        tmp_path, "pyproject.toml", '[project]\nname = "x"\n\n[tool.codeloop.budgets]\nmax_cost_usd = 0.5\n'
    )
    settings = load_settings(repo=repo, environ={})
    assert settings.budgets.max_cost_usd == 0.5 and settings.project_file == str(repo / "pyproject.toml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[budgets]\nmax_steps = 3\nmax_revisions 2\n",
            "{file}: not valid TOML: Expected '=' after a key in a key/value pair (at line 3, column 15)",
        ),
        (
            '[models]\ncoder = "openai-chat:gpt-4o"\n\n[budgets]\nmax_stepz = 3\n',
            "{file} line 5: unknown key 'budgets.max_stepz'; allowed here: max_steps, max_revisions,",
        ),
        (
            '[budgets]\nmax_steps = "ten"\n',
            "{file} line 2: budgets.max_steps: Input should be a valid integer",
        ),
        (
            "[budgets]\nmax_steps = -1\n",
            "{file} line 2: budgets.max_steps: Input should be greater than or equal to 1 (got -1)",
        ),
        (
            '[model_settings."openai-chat:gpt-4o"]\ntemprature = 0.2\n',
            "{file} line 2: unknown key 'model_settings.openai-chat:gpt-4o.temprature'; allowed here: temperature,",
        ),
        (
            '[pipelines]\nsecure = ["plan:planner", "reviewer"]\n',
            "{file} line 2: pipelines.secure: each stage is KIND:ROLE",
        ),
        (
            'colour = "blue"\n',
            "{file} line 1: unknown key 'colour'; allowed here: models, model_settings, budgets",
        ),
    ],
)
def test_a_malformed_file_is_an_error_naming_the_file_the_line_and_the_key(
    tmp_path: Path, user_dir: Path, text: str, expected: str
) -> None:
    """Issue acceptance: bad TOML, an unknown key, a wrong type each name the file, line or key."""
    (user_dir / "config.toml").write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_settings(repo=tmp_path, environ={})
    assert str(raised.value).startswith(expected.format(file=user_dir / "config.toml"))


def test_a_submission_naming_an_unknown_pipeline_or_an_unpriced_cost_budget_is_refused(
    tmp_path: Path, user_dir: Path
) -> None:
    """Issue: an unknown pipeline, and a cost budget on a model with no price, are usage errors;
    a price in the file, or genai-prices knowing the model, make the budget usable."""
    repo = _repo(
        tmp_path,
        "codeloop.toml",
        '[models]\ndefault = "function:models.py:answer"\n'
        '[pipelines]\nsecure = ["plan:planner", "verify:verifier"]\n',
    )
    settings = load_settings(repo=repo, flags=TaskOptions(cost_budget=1.0).layer(), environ={})
    task = TaskSubmitted(text="t", repo=str(repo), models=settings.models, budgets=settings.budgets)
    with pytest.raises(
        ConfigError,
        match=r"--cost-budget needs a price for every model, and 'function:.*answer' has none \(models.default in .*codeloop.toml\): set input_usd_per_mtok",
    ):
        check_submission(task, settings=settings)
    priced = settings.models.model_copy(
        update={"default": "openai-chat:gpt-4o", "planner": None, "coder": None}
    )
    check_submission(task.model_copy(update={"models": priced}), environ={"OPENAI_API_KEY": "k"})
    (repo / "codeloop.toml").write_text(
        '[models]\ndefault = "function:models.py:answer"\n[model_settings."function:models.py:answer"]\n'
        'input_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n[pipelines]\nsecure = ["plan:planner"]\n'
    )
    settings = load_settings(repo=repo, flags=TaskOptions(cost_budget=1.0).layer(), environ={})
    task = TaskSubmitted(text="t", repo=str(repo), models=settings.models, budgets=settings.budgets)
    check_submission(task, settings=settings, pipeline="secure")
    check_submission(task, settings=settings, pipeline="fix")
    with pytest.raises(ConfigError, match="no pipeline named 'securre'; known: .*secure"):
        check_submission(task, settings=settings, pipeline="securre")
