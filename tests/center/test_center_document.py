"""What a center document may hold and what it means for a task (our contract: docs/configuration.md,
"The configuration center"): the files' checks, no credentials, no file-only sections, and the
precedence command line > the center > the files."""

from pathlib import Path

import pytest

from agents.messages import Budgets, ModelNames, TaskSubmitted
from codeloop.config.center import CenterConfig, changed_keys, parse_document, settle
from codeloop.config.errors import ConfigError
from codeloop.config.files import read_config_file


def _doc(text: str) -> CenterConfig:
    return parse_document(text, label="fleet.toml", base=Path("/srv/fleet"))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[budgets]\nmax_stepz = 2\n", "budgets.max_stepz"),
        (
            '[models]\ndefault = "openai:gpt-4o"\nbase_url = "https://user:hunter2secretpw@example.com"\n',
            "models.base_url",
        ),
        ('[model_settings."openai:gpt-4o"]\ntemperature = 9\n', "temperature"),
        ('[tools]\nscopes = ["write", "execute"]\n', "[tools]"),
        ("[quotas.alice]\ntokens_per_dya = 5\n", "quotas.alice.tokens_per_dya"),
        ("[quotas.alice]\ntokens_per_day = -5\n", "quotas.alice.tokens_per_day"),
    ],
)
def test_a_bad_document_is_refused_naming_the_key(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match="fleet.toml") as caught:
        _doc(text)
    assert named in str(caught.value)


def test_a_value_that_looks_like_a_credential_is_refused_naming_its_key() -> None:
    with pytest.raises(ConfigError, match=r"models\.coder looks like a credential"):
        _doc('[models]\ncoder = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a"\n')


def test_quotas_live_only_in_the_center(tmp_path: Path) -> None:
    """A repository's file may not raise (or name) a quota."""
    (tmp_path / "codeloop.toml").write_text("[quotas.default]\ntokens_per_day = 999999999\n")
    with pytest.raises(ConfigError, match="unknown key 'quotas'"):
        read_config_file(tmp_path / "codeloop.toml")


def test_the_center_sits_between_the_command_line_and_the_files() -> None:
    document = _doc(
        '[models]\ndefault = "anthropic:claude-sonnet-4-5"\n\n[budgets]\nmax_steps = 7\nmax_tokens = 900\n'
    )
    from_files = TaskSubmitted(
        text="t",
        repo="/r",
        models=ModelNames(default="openai:gpt-4o", coder="openai:gpt-4o-mini"),
        budgets=Budgets(max_steps=40, max_tokens=5000),
        pinned=["budgets.max_tokens", "models.coder"],
    )
    settled = settle(from_files, document, revision=4, principal="local")
    assert settled.revision == 4
    assert settled.task.models.planner == "anthropic:claude-sonnet-4-5"  # the center over the files
    assert settled.task.models.coder == "openai:gpt-4o-mini"  # --coder-model over the center
    assert settled.task.budgets.max_steps == 7
    assert settled.task.budgets.max_tokens == 5000  # --token-budget over the center
    assert settled.quota is None


def test_a_function_path_is_relative_to_the_pushed_file_and_changed_keys_are_named() -> None:
    before = _doc("[budgets]\nmax_steps = 3\n")
    after = _doc('[models]\ncoder = "function:models/fix.py:fix"\n\n[quotas.default]\nmax_running = 2\n')
    assert after.models["coder"] == ["function:/srv/fleet/models/fix.py:fix"]
    assert changed_keys(before, after) == ["budgets.max_steps", "models.coder", "quotas.default.max_running"]
