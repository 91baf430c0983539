"""Secrets in free text: the patterns, and `redact_text` that replaces what they match.

What counts as a secret, in the order it is looked for:

1. private key blocks (`-----BEGIN ... PRIVATE KEY----- ... -----END ...`), whole;
2. `Authorization: Basic|Bearer|Token ...` (HTTP headers, curl `-H`), the credential part;
3. credentials inside URLs (`scheme://user:PASSWORD@host`), the password;
4. `KEY=value`, `KEY: value`, `"key": "value"` where KEY names a secret (`OPENAI_API_KEY`,
   `password`, `aws_secret_access_key`, `client_secret`, `auth_token`...), the value;
5. well-known token formats wherever they stand: OpenAI/Anthropic `sk-...`/`sk-ant-...`,
   GitHub `github_pat_...`/`ghp_...`/`gho_...`, Slack `xoxb-...`, AWS access key ids `AKIA...`,
   Google `AIza...`, npm `npm_...`, PyPI `pypi-...`, JWTs `eyJ...`;
6. high-entropy words (20+ characters of base64/hex alphabet, > 3.5 bits per character) within a
   few words after a secret word (`secret`, `token`, `password`, `key`...): an AWS secret key
   or a bare token pasted after "my secret is".

Nothing here spans lines except a private key block, whose line breaks are kept: redacted text
has the line numbering of the original. Over-redacting a harmless value (`max_tokens=100`) costs a log reader little; missing a secret
costs its owner a rotation, so the patterns lean towards matching.
"""

import math
import re
from collections import Counter

MASK = "[redacted]"

SECRET_WORD = (
    r"secret|passw(?:or)?d|passwd|pwd|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|credential|(?<![oO])auth(?!or)|session[_-]?id|cookie|signature|dsn"
)
_SECRET_KEY = re.compile(rf"(?i)(?:{SECRET_WORD})")
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)", re.S
)
_AUTH_HEADER = re.compile(
    r"(?i)(\b(?:proxy-)?authorization\s*[:=]\s*[\"']?\s*(?:basic|bearer|token|digest|negotiate)?\s*)"
    r"([^\s\"',;]+)"
)
_BARE_SCHEME = re.compile(r"(?i)(\b(?:bearer|basic)\s+)([A-Za-z0-9\-._~+/]{12,}=*)")
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^\s:/@\"']*:)([^\s@/\"']+)(@)", re.I)
# KEY (optionally quoted) names a secret; the value runs to the end of its quotes or to a separator.
_KEY_VALUE = re.compile(
    rf"(?i)((?:\"|'|\b)[A-Za-z0-9_.\-]*(?:{SECRET_WORD})[A-Za-z0-9_.\-]*(?:\"|')?([ \t]*)(?::|=|:=|=>)(?!=)([ \t]*))"
    r"(\"[^\"\n]+\"|'[^'\n]+'|[^\s,;&\"'}\])(\[]+)"
)
_CODE_NAME = re.compile(r"[A-Za-z_][A-Za-z_.]*\Z")
"""A name without digits (`current_token`, `self._token`, `EventLoopToken`): code, not a value."""
_FILE_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)+\Z")
"""A file path (two components or more) after a spaced separator names where a secret is, not it."""
_SPACED_CODE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
"""After a spaced `=` or `:` (`auth: httpx2.Auth`), a name with digits is code too."""
_TOKEN_FORMATS = re.compile(
    r"\bsk-ant-[A-Za-z0-9_\-]{8,}"
    r"|\bsk-[A-Za-z0-9_\-]{8,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abposre]-[A-Za-z0-9\-]{8,}"
    r"|\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"
    r"|\bAIza[0-9A-Za-z_\-]{30,}"
    r"|\bnpm_[A-Za-z0-9]{30,}"
    r"|\bpypi-[A-Za-z0-9_\-]{40,}"
    r"|\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
)
_NEAR_SECRET_WORD = re.compile(rf"(?i)(?:{SECRET_WORD}|key)")
_SECRET_FRAGMENTS = (
    "secret",
    "passw",
    "pwd",
    "token",
    "key",
    "credential",
    "auth",
    "session",
    "cookie",
    "signature",
    "dsn",
)
"""Lower-case substrings every match of `SECRET_WORD` (or `key`) contains."""
_CANDIDATE = re.compile(r"[A-Za-z0-9+/=_\-]{20,}")
_NEAR_CHARS = 48
"""How far after a secret word a high-entropy word is taken for its value."""
MIN_ENTROPY_BITS = 3.5


def names_secret(key: str) -> bool:
    """True when a field or variable name says its value is a secret (`api_key`, `DB_PASSWORD`)."""
    return bool(_SECRET_KEY.search(key))


def entropy_bits(word: str) -> float:
    """Shannon entropy per character of `word`."""
    counts = Counter(word)
    return -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())


def _looks_random(word: str) -> bool:
    # Real words and identifiers (snake_case, paths) have letters only, or few distinct ones;
    # a key or token mixes digits and letters at high entropy.
    has_digit = any(c.isdigit() for c in word)
    has_alpha = any(c.isalpha() for c in word)
    return has_digit and has_alpha and entropy_bits(word) > MIN_ENTROPY_BITS


def _mask_key_block(match: re.Match[str]) -> str:
    # The block's line breaks stay, so line numbers of what follows (in an index) do not move.
    return f"-----BEGIN {match.group(1)}PRIVATE KEY----- {MASK}" + "\n" * match.group(0).count("\n")


def _mask_key_value(match: re.Match[str]) -> str:
    value = match.group(4)
    if value in (MASK, f'"{MASK}"', f"'{MASK}'") or value.startswith(('""', "''")):
        return match.group(0)
    quote = value[0] if value[:1] in "\"'" else ""
    # An environment-style KEY (`OPENAI_API_KEY=abc`) always holds a value. Otherwise a bare name
    # or number (`token = current_token`, `token: EventLoopToken`, `total_tokens=0`) is code,
    # which an index must keep readable; `--password=hunter2` or `"token": "abc"` is a value.
    key = match.group(1).strip(" \t:=>\"'")
    spaced = bool(match.group(2) or match.group(3))
    name = (_SPACED_CODE_NAME if spaced else _CODE_NAME).match(value)
    called = match.string[match.end() : match.end() + 1] == "("
    path = spaced and _FILE_PATH.match(value)  # "credentials file: /home/u/.aws/credentials"
    if not quote and (value.isdigit() or called or path or (name and (spaced or not key.isupper()))):
        return match.group(0)
    return f"{match.group(1)}{quote}{MASK}{quote}"


def _mask_near_secret_words(text: str) -> str:
    spans: list[tuple[int, int]] = []
    for word in _NEAR_SECRET_WORD.finditer(text):
        window_end = min(len(text), word.end() + _NEAR_CHARS)
        for candidate in _CANDIDATE.finditer(text, word.end(), window_end):
            if _looks_random(candidate.group(0)):
                spans.append(candidate.span())
    if not spans:
        return text
    out, last = [], 0
    for start, end in sorted(set(spans)):
        if start < last:
            continue
        out += [text[last:start], MASK]
        last = end
    return "".join(out) + text[last:]


def _has_secret_word(lowered: str) -> bool:
    return any(fragment in lowered for fragment in _SECRET_FRAGMENTS)


def redact_text(text: str) -> str:
    """`text` with every secret the patterns above recognise replaced by `[redacted]`."""
    if not text:
        return text
    # Substring checks before each pattern: the regexes cost per character, and most text (code
    # being indexed) holds none of what they look for, so most text skips most patterns.
    lowered = text.lower()
    if "private key-----" in lowered:
        text = _PRIVATE_KEY_BLOCK.sub(_mask_key_block, text)
    if "authorization" in lowered:
        text = _AUTH_HEADER.sub(lambda m: m.group(1) + MASK, text)
    if "bearer" in lowered or "basic" in lowered:
        text = _BARE_SCHEME.sub(lambda m: m.group(1) + MASK, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    text = _TOKEN_FORMATS.sub(MASK, text)
    if not _has_secret_word(text.lower()):
        return text
    # Neither the key/value nor the entropy rule spans lines: only lines naming a secret word.
    return "".join(
        _mask_near_secret_words(_KEY_VALUE.sub(_mask_key_value, line))
        if _has_secret_word(line.lower())
        else line
        for line in text.splitlines(keepends=True)
    )
