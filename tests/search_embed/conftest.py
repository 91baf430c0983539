"""One real model for the whole folder: loading the bundled all-MiniLM-L6-v2 costs ~10 s of imports.

The load runs under an audit hook that records every socket connection or name lookup and with
warnings and stderr captured, so the offline tests can check what the load did.
"""

import contextlib
import io
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from tool_servers.search.embedding.embed import SentenceTransformerEmbedder, load_model

_NETWORK_EVENTS = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"}
_recording: list[str] | None = None


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _recording is not None and event in _NETWORK_EVENTS:
        _recording.append(f"{event} {args!r}")


@dataclass
class LoadRecord:
    """What happened while the model was loaded and first used."""

    network_events: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stderr: str = ""


@pytest.fixture(scope="session")
def load_record_and_model() -> tuple[LoadRecord, SentenceTransformerEmbedder]:
    global _recording
    record = LoadRecord()
    sys.addaudithook(_audit)  # hooks cannot be removed; `_recording` gates this one
    stderr = io.StringIO()
    _recording = record.network_events
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stderr):
            warnings.simplefilter("always")
            model = load_model()
            model.embed(["def warm_up(): pass"])
    finally:
        _recording = None
    record.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    record.stderr = stderr.getvalue()
    return record, model


@pytest.fixture(scope="session")
def fast_model(
    load_record_and_model: tuple[LoadRecord, SentenceTransformerEmbedder],
) -> SentenceTransformerEmbedder:
    return load_record_and_model[1]


@pytest.fixture(scope="session")
def plain_model(fast_model: SentenceTransformerEmbedder) -> SentenceTransformerEmbedder:
    # Same token cap as the fast path: this reference isolates precision and batching.
    return fast_model.with_options(fast=False)


@pytest.fixture(scope="session")
def code_chunks() -> list[str]:
    """Function bodies of an installed library nobody here wrote (click), of varied length."""
    import ast

    import click

    chunks: list[str] = []
    for file in sorted(Path(click.__file__).parent.glob("*.py")):
        source = file.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                chunks.append("\n".join(lines[node.lineno - 1 : node.end_lineno]))
    rng = np.random.default_rng(0)
    picked = rng.choice(len(chunks), size=min(48, len(chunks)), replace=False)
    return [chunks[i] for i in sorted(picked)]
