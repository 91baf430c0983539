"""Credentials in added lines: known key formats and high-entropy tokens assigned to secret names.

Two kinds of evidence, as secret scanners (gitleaks, detect-secrets) use them: a token in a
format only credentials have (an AWS access key id, a PEM private key header, a GitHub or Slack
token...), or a long random-looking string (Shannon entropy over 4 bits per character for 20+
characters of base64/hex alphabet) assigned to a name that says it is secret. The entropy rule
needs the name, because hashes and ids in code and test data are random-looking too. What is
reported names the kind and the line, never the value.
"""

import math
import re
from collections import Counter

KEY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})\b")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b")),
    ("an OpenAI or Anthropic API key", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("a Stripe secret key", re.compile(r"\b[rs]k_live_[0-9A-Za-z]{16,}\b")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")),
    ("a password in a URL", re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s:@]{3,}@", re.I)),
)
_SECRET_NAME = r"[A-Za-z0-9_.-]*(?:secret|passw(?:or)?d|passwd|token|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth)[A-Za-z0-9_.-]*"
_ASSIGNED = re.compile(
    rf"(?P<name>{_SECRET_NAME})['\"]?\s*(?::|=|:=|=>)\s*[rbuf]?['\"](?P<value>[^'\"\s]{{12,}})['\"]", re.I
)
_TOKEN_ALPHABET = re.compile(r"^[A-Za-z0-9+/=_\-.]+$")
MIN_ENTROPY_BITS = 4.0
MIN_TOKEN_CHARS = 20
_PLACEHOLDER = re.compile(
    r"^(?:x+|\*+|<[^>]*>|\$\{?[A-Za-z_]+\}?|your[_-].*|changeme|dummy.*|example.*|test.*)$", re.I
)


def entropy_bits(text: str) -> float:
    """Shannon entropy of `text` in bits per character."""
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def find_secret(line: str) -> str | None:
    """What kind of credential `line` seems to hold, or None."""
    for kind, pattern in KEY_PATTERNS:
        if pattern.search(line):
            return kind
    for match in _ASSIGNED.finditer(line):
        value = match["value"]
        if _PLACEHOLDER.match(value) or not _TOKEN_ALPHABET.match(value):
            continue
        if len(value) >= MIN_TOKEN_CHARS and entropy_bits(value) >= MIN_ENTROPY_BITS:
            return f"a high-entropy value assigned to {match['name']!r}"
    return None
