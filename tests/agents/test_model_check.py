"""The up-front model check: the names it accepts are the ones the model adapter can build."""

import ast
import inspect
from pathlib import Path

import pytest
from pydantic_ai import providers

from agents.errors import ModelSpecError
from agents.models.adapter import model_factory
from agents.models.check import CREDENTIALS, PROVIDERS, ModelNameProblem, check_model_name


def test_the_known_providers_are_exactly_pydantic_ais() -> None:
    """Our design: the check reads a table instead of importing pydantic-ai (a second's start-up);
    the table must be the installed pydantic-ai's `infer_provider_class` cases, no more, no less."""
    tree = ast.parse(inspect.getsource(providers.infer_provider_class))
    cases = {
        node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.MatchValue) and isinstance(node.value, ast.Constant)
    }
    assert cases == PROVIDERS
    assert set(CREDENTIALS) <= PROVIDERS


@pytest.mark.parametrize(
    ("name", "environ", "fragment"),
    [
        ("nosuchprovider:model-x", {}, "unknown provider 'nosuchprovider'"),
        ("gpt-4o", {}, "is not PROVIDER:MODEL"),
        ("anthropic:claude-sonnet-4-5", {}, "needs ANTHROPIC_API_KEY"),
        ("openai-chat:gpt-4o", {}, "needs OPENAI_API_KEY or OPENAI_BASE_URL"),
        ("ollama:llama3", {"OLLAMA_API_KEY": "x"}, "needs OLLAMA_BASE_URL"),
        ("function:{tmp}/missing.py:f", {}, "does not exist"),
        ("function:{tmp}/script.py:nosuch", {}, "defines no 'nosuch'; its functions: answer"),
        ("function:{tmp}/broken.py:f", {}, "cannot be read as Python"),
        ("function:{tmp}/assigned.py:fixx", {}, "defines no 'fixx'; its functions: answer, fix, explain$"),
        ("function:{tmp}/listed.py:fixx", {}, "defines no 'fixx'; its functions: fix, explain$"),
    ],
)
def test_unresolvable_names_are_refused_naming_the_value_and_the_fix(
    tmp_path: Path, name: str, environ: dict[str, str], fragment: str
) -> None:
    """Our contract: an unknown provider, a missing function file or name, missing credentials
    are found before anything starts, and the message says what to change."""
    (tmp_path / "script.py").write_text("def answer(messages, info):\n    return None\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    # Callables a script assigns (a factory's result, an alias) are offered as much as its defs.
    (tmp_path / "assigned.py").write_text(
        "TIMEOUT = 5\ndef answer(messages, info):\n    return None\nfix = make(1)\nexplain = answer\n"
    )
    (tmp_path / "listed.py").write_text('__all__ = ["fix", "explain"]\nfrom x import fix, explain\n')
    with pytest.raises(ModelNameProblem, match=fragment.replace("(", r"\(")):
        check_model_name(name.format(tmp=tmp_path), environ=environ)


def test_names_the_check_accepts_the_model_adapter_builds(tmp_path: Path) -> None:
    """Our design: the fast check and the adapter agree; a local OpenAI-compatible server needs
    only its base URL, and a function name bound by an import counts."""
    (tmp_path / "script.py").write_text("from json import loads as answer\n")
    for name, environ in [
        ("openai-chat:llama3", {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}),
        ("anthropic:claude-sonnet-4-5", {"ANTHROPIC_API_KEY": "k"}),
        ("ollama:llama3", {"OLLAMA_BASE_URL": "http://127.0.0.1:11434/v1"}),
        ("test", {}),
        ("replay:task-1", {}),
    ]:
        check_model_name(name, environ=environ)
        model_factory(name)
    check_model_name(f"function:{tmp_path}/script.py:answer", environ={})
    with pytest.raises(ModelSpecError):
        model_factory("nosuchprovider:model-x")
