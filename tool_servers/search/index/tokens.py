"""Token estimates for budgets (repo map, context packs).

The index does not know which model will read its output, so budgets use an estimate: one token
per 4 characters, the usual ratio of BPE tokenizers on English and code, rounded up, and at least
one token per line because every newline costs one. Callers with a real tokenizer pass their own
counter where a function accepts `count_tokens`.
"""

from collections.abc import Callable

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text` (see module docstring)."""
    if not text:
        return 0
    return max(-(-len(text) // 4), text.count("\n") + 1)
