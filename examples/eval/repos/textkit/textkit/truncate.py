"""Teasers: text cut to a length with an ellipsis, preferably at a word boundary."""

ELLIPSIS = "..."


def truncate(text: str, limit: int, *, ellipsis: str = ELLIPSIS) -> str:
    """`text` if it fits in `limit` characters, else a prefix plus `ellipsis`, `limit` in total."""
    if limit < len(ellipsis):
        raise ValueError("limit must leave room for the ellipsis")
    if len(text) <= limit:
        return text
    return text[: limit - len(ellipsis) + 1] + ellipsis


def truncate_words(text: str, limit: int, *, ellipsis: str = ELLIPSIS) -> str:
    """Like `truncate`, but never cuts a word in half (unless the first word alone is too long)."""
    if len(text) <= limit:
        return text
    room = limit - len(ellipsis)
    cut = text[: room + 1].rsplit(" ", 1)[0] if " " in text[:room] else text[:room]
    return cut.rstrip() + ellipsis
