"""From a model name to a pydantic-ai `Model`: provider names and `function:PATH.py:NAME` files.

Provider names (`openai:…`, `openai-chat:…`, `anthropic:…`, `ollama:…`, any provider pydantic-ai
knows) are checked when the name is read, but the model itself is built at its first call: the
providers read their API keys and base URLs (`OPENAI_API_KEY`, `OPENAI_BASE_URL`,
`ANTHROPIC_API_KEY`, `OLLAMA_BASE_URL`) from the environment when constructed, and a worker
configured before its keys are known must still start. The missing variable is then named at the
call that needed it.

A `function:` file is loaded at once instead, so a typo in a scripted model's path fails before a
task is submitted, not halfway through it.

`local:PATH.gguf` names a model file served by llama.cpp on this machine (`agents.models.local`):
the file is checked when the name is read; its server starts at the first request, through the
`LocalServers` of the process (`local=`). `ollama:`, `vllm:` and `openai-chat:` with a base URL
are wrapped in `ContextChecked`: a prompt larger than the server's context is an error, not a
silent truncation.

`replay:TASK_ID` names the recorded responses of an earlier task (`codeloop replay`). The model
itself is never called: the recorder every LLM role's run gets (`agents/replay/`) answers each
request from the recording; a process without it fails the step with a message saying so.
"""

import hashlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model, parse_model_id
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.providers import infer_provider_class

from agents.errors import ModelNotConfigured, ModelSpecError
from agents.models.local import CHECKED_PROVIDERS, ContextChecked, LocalModel, local_model_path
from agents.models.local_server import LocalServerError, LocalServers, check_model_file

FUNCTION_PREFIX = "function:"
REPLAY_PREFIX = "replay:"

ModelFactory = Callable[[], Model]
"""Builds the model; raises `ModelNotConfigured` while a variable the provider needs is unset."""

# (resolved path, mtime_ns, size) -> module: the planner and coder named by one `--model
# function:…` share one module, and so its state, as they would share one real model.
_loaded: dict[tuple[str, int, int], ModuleType] = {}


def model_factory(
    name: str,
    *,
    base_dir: Path | None = None,
    local: LocalServers | None = None,
    context_tokens: int | None = None,
    timeout_s: float | None = None,
) -> ModelFactory:
    """Check `name` now and return what builds its model at the first call.

    `base_dir` anchors a relative `function:` or `local:` path (default: the current directory);
    `local` starts the servers of `local:` models; `context_tokens` is the model's configured
    context window (`ModelOptions.context_tokens`); `timeout_s` how long a `local:` model's
    response may take (`ModelOptions.timeout_s`).

    Raises:
        ModelSpecError: the name has no provider prefix, names an unknown provider, or a
            `function:` file, attribute or callable is missing, or a `local:` file is no GGUF file.
    """
    name = name.strip()
    path = local_model_path(name)
    if path is not None:
        return _local_factory(
            name, path, base_dir=base_dir, local=local, context_tokens=context_tokens, timeout_s=timeout_s
        )
    if name.startswith(FUNCTION_PREFIX):
        model = load_function_model(name, base_dir=base_dir)
        return lambda: model
    if name.startswith(REPLAY_PREFIX):
        task_id = name[len(REPLAY_PREFIX) :]
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,128}", task_id):
            raise ModelSpecError(f"model {name!r} is not replay:TASK_ID")
        return lambda: FunctionModel(_replay_only, model_name=name)  # pyright: ignore[reportArgumentType] - replay models never call it: _replay_only raises, the recording answers
    if name == "test":
        return lambda: infer_model("test")
    provider, model_name = parse_model_id(name)
    if provider is None or not model_name:
        raise ModelSpecError(
            f"model {name!r} is not PROVIDER:MODEL (e.g. openai-chat:gpt-4o, anthropic:claude-sonnet-4-5, "
            "ollama:llama3) nor function:PATH.py:NAME"
        )
    try:
        infer_provider_class(provider)
    except ValueError:
        raise ModelSpecError(f"model {name!r}: unknown provider {provider!r}") from None
    except ImportError as exc:
        raise ModelSpecError(
            f"model {name!r}: the {provider} client library is not installed ({exc.name}); "
            f"install pydantic-ai-slim[{provider.split('-')[0]}]"
        ) from None
    return lambda: _checked(_build_provider_model(name), name, provider, context_tokens)


def _local_factory(
    name: str,
    path: Path,
    *,
    base_dir: Path | None,
    local: LocalServers | None,
    context_tokens: int | None,
    timeout_s: float | None,
) -> ModelFactory:
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    try:
        check_model_file(path)
    except LocalServerError as exc:
        raise ModelSpecError(f"model {name!r}: {exc}") from None
    resolved = path.resolve()
    return lambda: LocalModel(
        resolved, servers=local, context_tokens=context_tokens, response_timeout_s=timeout_s
    )


def _checked(model: Model, name: str, provider: str, context_tokens: int | None) -> Model:
    """`model` with its prompts checked against its context window where one can be known: a
    configured one, or a server that may be local (`CHECKED_PROVIDERS`; `openai-chat:` only with
    a base URL)."""
    if context_tokens is None:
        if provider not in CHECKED_PROVIDERS:
            return model
        if provider == "openai-chat" and not os.environ.get(CHECKED_PROVIDERS[provider]):
            return model
    return ContextChecked(model, name=name, provider=provider, context_tokens=context_tokens)


def _replay_only(messages: object, info: object) -> object:
    raise ModelNotConfigured(
        "a replay: model answers only through the recorder of a codeloop serve that installs it; "
        "run the replay against such a serve (or none: `codeloop replay` then runs every role itself)"
    )


def _build_provider_model(name: str) -> Model:
    try:
        return infer_model(name)
    except UserError as exc:
        # pydantic-ai names the variable in backquotes: "Set the `OPENAI_API_KEY` environment variable…".
        found = re.search(r"`([A-Z][A-Z0-9_]+)`", str(exc))
        variable = found.group(1) if found else None
        what = f"{variable} is not set" if variable else str(exc).split(". ")[0]
        raise ModelNotConfigured(
            f"model {name!r} cannot be called: {what}; set it in the environment of the process that runs it",
            variable=variable,
        ) from None


def load_function_model(name: str, *, base_dir: Path | None = None) -> FunctionModel:
    """`function:PATH.py:NAME` → a `FunctionModel` around that callable (sync or async).

    Raises:
        ModelSpecError: bad syntax, no such file, the file fails to import, no attribute NAME,
            or NAME is not a callable taking (messages, info).
    """
    rest = name[len(FUNCTION_PREFIX) :]
    path_text, sep, attr = rest.rpartition(":")
    if not sep or not path_text or not attr.isidentifier():
        raise ModelSpecError(f"model {name!r} is not function:PATH.py:NAME")
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    path = path.resolve()
    if not path.is_file():
        raise ModelSpecError(f"model {name!r}: no such file {path}")
    module = _load_module(path, name)
    if not hasattr(module, attr):
        raise ModelSpecError(f"model {name!r}: {path.name} defines no {attr!r}")
    function = getattr(module, attr)
    if not callable(function):
        raise ModelSpecError(
            f"model {name!r}: {attr!r} in {path.name} is a {type(function).__name__}, not a callable"
        )
    _check_signature(function, name)
    model_name = f"function:{path.name}:{attr}"
    if inspect.isasyncgenfunction(function):
        # An async generator yields pieces of a streamed response: FunctionModel's stream_function.
        model = FunctionModel(stream_function=function, model_name=model_name)
    else:
        model = FunctionModel(function, model_name=model_name)  # pyright: ignore[reportArgumentType] - a model file's function, checked by _check_signature, not by its annotations
    priced_as = getattr(function, "priced_as", None)
    if priced_as is not None:
        if not isinstance(priced_as, str) or not priced_as.strip():
            raise ModelSpecError(f"model {name!r}: {attr}.priced_as must be a model name, e.g. 'gpt-4o'")
        # A scripted stand-in priced like the model it stands in for: what cost budgets and eval
        # cost figures are tested with (see `agents.models.metered`).
        model.priced_as = priced_as.strip()  # type: ignore[attr-defined] - pydantic-ai's FunctionModel has no priced_as: metered.py reads it with getattr
    return model


def _load_module(path: Path, name: str) -> ModuleType:
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key in _loaded:
        return _loaded[key]
    module_name = f"codeloop_function_model_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelSpecError(f"model {name!r}: {path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before executing, as import does, so dataclasses and pickling inside the file work.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ModelSpecError(
            f"model {name!r}: importing {path.name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    _loaded[key] = module
    return module


def _check_signature(function: Callable[..., object], name: str) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # some builtins and C callables have no signature to check; the first call will tell
    try:
        signature.bind(None, None)
    except TypeError:
        raise ModelSpecError(
            f"model {name!r}: the callable must take (messages, info) like pydantic-ai's FunctionModel; "
            f"it is {signature}"
        ) from None
