"""Secrets in structured values (tool arguments, event data): walk the value, redact every string.

A mapping entry whose key names a secret (`names_secret`) loses its string value entirely; every
other string goes through `redact_text`. Entries named in `digest_keys` (file contents, patches)
and strings longer than `max_string` are replaced by their size and digest: a record then says
which bytes were written without holding them.
"""

import hashlib
from collections.abc import Collection, Mapping
from typing import Any

from redaction.text import MASK, names_secret, redact_text

MAX_STRING = 512
"""Longer strings are summarised by size and digest, never kept."""


def digest_summary(text: str) -> str:
    """`[N chars sha256:PREFIX]`: enough to match a record to content, too little to recover it."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"[{len(text)} chars sha256:{digest}]"


def redact(
    value: object,
    *,
    key: str = "",
    digest_keys: Collection[str] = (),
    max_string: int = MAX_STRING,
) -> Any:
    """`value` (JSON-like) with secrets masked, `digest_keys` and long strings summarised."""
    if isinstance(value, str):
        if key in digest_keys or len(value) > max_string:
            return digest_summary(value)
        if key and names_secret(key) and value:
            return MASK
        return redact_text(value)
    if isinstance(value, Mapping):
        return {
            str(k): redact(v, key=str(k), digest_keys=digest_keys, max_string=max_string)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        # Items inherit the key: a list of passwords under `passwords` is still secret. In an
        # argv, the word after an option naming a secret (`--password X`, `--token X`) is one.
        out: list[object] = []
        secret_next = False
        for item in value:
            if secret_next and isinstance(item, str) and item:
                out.append(MASK)
            else:
                out.append(redact(item, key=key, digest_keys=digest_keys, max_string=max_string))
            secret_next = _is_secret_option(item)
        return out
    return value


def _is_secret_option(item: object) -> bool:
    return isinstance(item, str) and item.startswith("-") and "=" not in item and names_secret(item)
