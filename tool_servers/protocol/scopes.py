"""Permission scopes and risk levels of the tool protocol.

A server is started with a set of granted scopes; every tool declares the one scope it needs.
Tools outside the grant are neither listed nor callable (docs/tool-protocol.md, "Scopes and grants").
"""

from collections.abc import Iterable
from enum import StrEnum


class Scope(StrEnum):
    """What a tool may do to the world outside the server."""

    READ = "read"
    """Look at files, history and indexes; never changes anything."""
    WRITE = "write"
    """Change files in the root or refs in its repository."""
    EXECUTE = "execute"
    """Run programs (in the sandbox)."""


ALL_SCOPES: frozenset[Scope] = frozenset(Scope)


class Risk(StrEnum):
    """How much harm a mistaken call can do; `high` calls ask a human first."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


def parse_scopes(text: str | Iterable[str]) -> frozenset[Scope]:
    """Parse `"read,write"` (or an iterable of names) into scopes.

    Raises:
        ValueError: A name is not a scope; the message lists the valid ones.
    """
    names = text.split(",") if isinstance(text, str) else list(text)
    scopes: set[Scope] = set()
    for raw in names:
        name = raw.strip().lower()
        if not name:
            continue
        try:
            scopes.add(Scope(name))
        except ValueError:
            valid = ", ".join(s.value for s in Scope)
            raise ValueError(f"unknown scope {raw.strip()!r}; valid scopes are: {valid}") from None
    return frozenset(scopes)


def format_scopes(scopes: Iterable[Scope]) -> str:
    """`read,write` in the canonical order, or `(none)`."""
    ordered = [s.value for s in Scope if s in set(scopes)]
    return ",".join(ordered) if ordered else "(none)"
