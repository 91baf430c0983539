"""The seam through which every text the model adapter logs or reports passes.

`_redact` is deliberately minimal (token-shaped words, Bearer headers, secret-named KEY=value
pairs); the project-wide redaction package replaces it once it is wired in, and nothing else here
needs to change then.
"""

import re

PREVIEW_CHARS = 200
"""Longest excerpt of a prompt, model output or provider error that leaves the adapter."""

MASK = "[redacted]"

_PATTERNS = (
    # Provider key formats: OpenAI/Anthropic style `sk-…`, plus common bearer-ish prefixes.
    re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
    re.compile(r"(?i)\b([A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Z0-9_]*)\s*[=:]\s*[\"']?[^\s\"',;]+"),
)


def _redact(text: str) -> str:
    """`text` with anything that looks like a secret replaced by `[redacted]`."""
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: f"{m.group(1)}={MASK}" if m.groups() else MASK, text)
    return text


def trim(text: str, limit: int = PREVIEW_CHARS) -> str:
    """At most `limit` characters of `text`, marking the cut (and its size) when there was one."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text)} chars]"
