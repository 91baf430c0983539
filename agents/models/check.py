"""Whether a model name can be resolved, decided without importing pydantic-ai or running anything.

A command that would start work checks every model a task names first, so a typo is a usage
error within a second instead of a failed step after the bus, the snapshot and the planner have
started. Importing pydantic-ai alone takes about a second, and a provider's SDK up to another, so
this check reads only names and files:

- `PROVIDER:MODEL`: PROVIDER must be one pydantic-ai's `infer_provider_class` knows (`PROVIDERS`,
  kept in step with the installed pydantic-ai by `tests/agents/test_model_check.py`), and the
  variables the provider reads at construction must be set (`CREDENTIALS`: API keys, or the base
  URL of a local server);
- `function:PATH.py:NAME`: the file must exist, parse, and bind NAME (a def, class, assignment or
  import; read with `ast`, not executed: the worker that runs the model imports it);
- `local:PATH.gguf`: the file must be a GGUF file, and llama-cpp-python's server installed;
- `replay:TASK_ID` and `test` are always accepted here.

What this cannot see (a model the provider does not serve, a key it refuses) is found at the first
call and classed there (`agents.models.retry`).
"""

import ast
import os
import re
from collections.abc import Mapping
from pathlib import Path

from agents.errors import AgentError
from agents.models.local_server import LocalServerError, check_model_file, check_runtime

# The provider names pydantic-ai's `infer_provider_class` accepts (its `match` cases).
PROVIDERS = frozenset(
    {
        "openai",
        "openai-chat",
        "openai-responses",
        "openai-decisions",
        "openai-codex",
        "openai-chatgpt",
        "azure",
        "azure-responses",
        "google",
        "google-decisions",
        "google-cloud",
        "anthropic",
        "bedrock",
        "bedrock-mantle",
        "groq",
        "mistral",
        "cerebras",
        "cohere",
        "deepseek",
        "openrouter",
        "vercel",
        "system-one",
        "crusoe",
        "elevenlabs",
        "xai",
        "moonshotai",
        "meta",
        "fireworks",
        "together",
        "heroku",
        "huggingface",
        "ollama",
        "github",
        "github-copilot",
        "litellm",
        "vllm",
        "nebius",
        "ovhcloud",
        "alibaba",
        "sambanova",
        "sentence-transformers",
        "snowflake",
        "typesafe",
        "voyageai",
        "zai",
    }
)

_OPENAI = (("OPENAI_API_KEY", "OPENAI_BASE_URL"),)
CREDENTIALS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "openai": _OPENAI,
    "openai-chat": _OPENAI,
    "openai-responses": _OPENAI,
    "anthropic": (("ANTHROPIC_API_KEY",),),
    "ollama": (("OLLAMA_BASE_URL",),),
    "vllm": (("VLLM_BASE_URL",),),
    "groq": (("GROQ_API_KEY",),),
    "mistral": (("MISTRAL_API_KEY",),),
    "google": (("GOOGLE_API_KEY", "GEMINI_API_KEY"),),
    "deepseek": (("DEEPSEEK_API_KEY",),),
    "openrouter": (("OPENROUTER_API_KEY",),),
    "cerebras": (("CEREBRAS_API_KEY",),),
    "cohere": (("CO_API_KEY",),),
    "xai": (("XAI_API_KEY",),),
    "together": (("TOGETHER_API_KEY",),),
    "fireworks": (("FIREWORKS_API_KEY",),),
    "huggingface": (("HF_TOKEN",),),
}
"""Provider -> what its constructor needs: each inner tuple is a choice of variables, one of which
must be set (OpenAI takes a key, or a base URL of an OpenAI-compatible server that needs none).
Providers not listed (cloud SDKs with their own credential chains) are not checked up front."""

_REPLAY = re.compile(r"replay:[A-Za-z0-9_-]{1,128}")


class ModelNameProblem(AgentError, ValueError):
    """A model name that cannot be resolved; the message names the value and the fix."""

    failure_class = "env.setup"


def check_model_name(
    name: str,
    *,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    credentials: bool = True,
) -> None:
    """Check `name` as described in the module docstring; `base_dir` anchors a relative
    `function:` path, `environ` (default: this process's) is where credentials are looked for.

    Raises:
        ModelNameProblem: what is wrong with `name` and what to do about it.
    """
    name = name.strip()
    if name == "test" or _REPLAY.fullmatch(name):
        return
    if name.startswith("function:"):
        _check_function(name, base_dir or Path.cwd())
        return
    if name.startswith("local:"):
        _check_local(name, base_dir or Path.cwd())
        return
    provider, sep, model = name.partition(":")
    if not sep or not provider or not model:
        raise ModelNameProblem(
            f"model {name!r} is not PROVIDER:MODEL (e.g. openai-chat:gpt-4o, anthropic:claude-sonnet-4-5, "
            "ollama:llama3) nor function:PATH.py:NAME"
        )
    if provider.startswith("gateway/"):
        return
    if provider not in PROVIDERS:
        raise ModelNameProblem(
            f"model {name!r}: unknown provider {provider!r}; use one of {', '.join(sorted(_COMMON))} "
            "(or any provider pydantic-ai knows)"
        )
    if credentials:
        missing = missing_credentials(provider, os.environ if environ is None else environ)
        if missing:
            raise ModelNameProblem(
                f"model {name!r} needs {missing} set in the environment of this command; "
                "set it, or choose another model"
            )


_COMMON = ("anthropic", "ollama", "openai", "openai-chat", "google", "groq", "mistral", "vllm")


def missing_credentials(provider: str, environ: Mapping[str, str]) -> str | None:
    """The variable (or the choice of variables, `A or B`) `provider` needs and `environ` lacks."""
    for choice in CREDENTIALS.get(provider, ()):
        if not any(environ.get(variable) for variable in choice):
            return " or ".join(choice)
    return None


def _check_local(name: str, base_dir: Path) -> None:
    path = Path(name.removeprefix("local:").strip()).expanduser()
    if not name.removeprefix("local:").strip():
        raise ModelNameProblem(f"model {name!r} is not local:PATH.gguf")
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        raise ModelNameProblem(
            f"model {name!r}: the file {path} does not exist; give the path of a GGUF model file"
        )
    try:
        check_model_file(path)
        check_runtime()
    except LocalServerError as exc:
        raise ModelNameProblem(f"model {name!r}: {exc}") from None


def _check_function(name: str, base_dir: Path) -> None:
    rest = name.removeprefix("function:")
    path_text, sep, attr = rest.rpartition(":")
    if not sep or not path_text or not attr.isidentifier():
        raise ModelNameProblem(f"model {name!r} is not function:PATH.py:NAME")
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        raise ModelNameProblem(
            f"model {name!r}: the file {path} does not exist; give the path of a Python file"
        )
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise ModelNameProblem(f"model {name!r}: {path} cannot be read as Python: {exc}") from None
    bound = _bound_names(tree)
    if bound is not None and attr not in bound:
        functions = _offered_functions(tree)
        more = f" and {len(functions) - 10} more" if len(functions) > 10 else ""
        shown = ", ".join(functions[:10]) + more or "none"
        raise ModelNameProblem(f"model {name!r}: {path.name} defines no {attr!r}; its functions: {shown}")


# What a module-level assignment may bind a callable with: `fix = scripted(...)`, `fix = other`,
# `fix = module.fix`, `fix = lambda messages, info: ...`; a literal (`TIMEOUT = 5`) binds none.
_CALLABLE_VALUES = (ast.Call, ast.Name, ast.Attribute, ast.Lambda)


def _offered_functions(tree: ast.Module) -> list[str]:
    """The public names a model file offers, in file order: its `__all__` when it has one, else
    its functions and the callables it assigns (not ALL_CAPS constants)."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if targets == ["__all__"] and isinstance(node.value, ast.List | ast.Tuple):
                return [
                    e.value
                    for e in node.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
            if isinstance(node.value, _CALLABLE_VALUES):
                names.extend(t for t in targets if not t.isupper())
    return [n for n in dict.fromkeys(names) if not n.startswith("_")]


def _bound_names(tree: ast.Module) -> set[str] | None:
    """Names the module binds anywhere; None when a star import makes that unknowable."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            if node.name == "*":
                return None
            names.add((node.asname or node.name).split(".")[0])
    return names


def declares_priced_as(name: str, *, base_dir: Path | None = None) -> bool:
    """Whether the `function:` model `name` sets `NAME.priced_as = "..."` in its file (read with
    `ast`, not run): such a scripted stand-in is priced as that model (`agents.models.names`)."""
    path_text, sep, attr = name.removeprefix("function:").rpartition(":")
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, ast.Assign)
        and any(
            isinstance(t, ast.Attribute)
            and t.attr == "priced_as"
            and isinstance(t.value, ast.Name)
            and t.value.id == attr
            for t in node.targets
        )
        for node in tree.body
    )
