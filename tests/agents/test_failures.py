"""The one failure taxonomy: every class defined, blamed and documented."""

from pathlib import Path

from agents.failures import BLAME, DEFINITIONS, FailureClass, blame

DOC = Path(__file__).resolve().parents[2] / "docs" / "failure-classes.md"


def test_every_class_has_a_definition_and_a_blame() -> None:
    """Our contract: the evaluation splits every failure into environment, model or ambiguous."""
    assert set(DEFINITIONS) == set(FailureClass)
    assert set(BLAME) == set(FailureClass)
    assert blame("env.infra") == "environment"
    assert blame("test.regression") == "model"
    assert blame("test.timeout") == "ambiguous"


def test_the_documentation_lists_every_class_with_its_blame() -> None:
    """docs/failure-classes.md is the taxonomy's documentation: one row per class, same blame."""
    text = DOC.read_text()
    for cls in FailureClass:
        assert f"| `{cls.value}` | {BLAME[cls]} |" in text, cls
