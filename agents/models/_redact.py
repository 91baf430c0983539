"""The seam through which every text the model adapter logs or reports passes: the project's one
redaction rule (`redaction.redact_text`), plus trimming to a preview."""

from redaction import MASK, redact_text

PREVIEW_CHARS = 200
"""Longest excerpt of a prompt, model output or provider error that leaves the adapter."""

__all__ = ["MASK", "PREVIEW_CHARS", "_redact", "trim"]


def _redact(text: str) -> str:
    """`text` with anything that looks like a secret masked."""
    return redact_text(text)


def trim(text: str, limit: int = PREVIEW_CHARS) -> str:
    """At most `limit` characters of `text`, marking the cut (and its size) when there was one."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text)} chars]"
