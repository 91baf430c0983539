"""Which model each role gets: per-task override > CLI flags > CODELOOP_MODEL > config file > none."""

import pytest
from pydantic import ValidationError

from agents.models import ModelChoice, merge_choices


def test_role_override_beats_the_default_within_one_layer() -> None:
    """CLI contract: --model sets every role, --planner-model / --coder-model override one."""
    choice = ModelChoice(default="openai-chat:a", planner="anthropic:b")
    assert (choice.for_role("planner"), choice.for_role("coder")) == ("anthropic:b", "openai-chat:a")


def test_no_model_anywhere_means_diagnose_mode() -> None:
    """CLI contract: with no model at all the task runs in diagnose mode."""
    merged = merge_choices(None, ModelChoice(), None)
    assert merged.is_empty
    assert merged.for_role("coder") is None


def test_layers_take_precedence_task_then_cli_then_environment_then_config_file() -> None:
    """Our design: each layer names what it names; the highest layer naming a role decides it."""
    task = ModelChoice(coder="function:task.py:coder")
    cli = ModelChoice(planner="openai-chat:cli-planner")
    env = ModelChoice(default="ollama:env")
    config = ModelChoice(default="anthropic:config", planner="anthropic:config-planner")
    merged = merge_choices(task, cli, env, config)
    assert merged.for_role("coder") == "function:task.py:coder"
    assert merged.for_role("planner") == "openai-chat:cli-planner"
    assert merged.default == "ollama:env"


def test_a_higher_default_overrides_a_lower_role_entry() -> None:
    """CLI contract: `--model` (or CODELOOP_MODEL) sets every LLM role, even one the config file names."""
    merged = merge_choices(ModelChoice(default="ollama:env"), ModelChoice(planner="anthropic:config-planner"))
    assert merged.for_role("planner") == "ollama:env"


def test_lower_layers_fill_what_higher_ones_leave_unnamed() -> None:
    """Our design: a per-task coder override leaves the planner to the CLI, environment or config file."""
    merged = merge_choices(ModelChoice(coder="x:task"), None, None, ModelChoice(default="y:config"))
    assert (merged.for_role("planner"), merged.for_role("coder")) == ("y:config", "x:task")


def test_merging_a_merged_choice_again_keeps_precedence() -> None:
    """Our design: a merged choice spells out every role, so it can be merged again as one layer."""
    base = merge_choices(ModelChoice(default="a:cli"), ModelChoice(coder="b:config"))
    assert merge_choices(ModelChoice(planner="c:task"), base) == ModelChoice(
        default="a:cli", planner="c:task", coder="a:cli"
    )


def test_model_choice_is_closed() -> None:
    """Our wire rule: models we own forbid unknown fields, so a misspelt role fails loudly."""
    with pytest.raises(ValidationError):
        ModelChoice(verifier="openai-chat:x")  # type: ignore[call-arg]
