"""Counts in the words a person reads: `1 file`, `2 files`, `0 files` (never `1 files`)."""


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`number` and `noun`, the noun in the plural unless `number` is exactly 1 (`plural` when
    adding an `s` is wrong: `counted(2, "entry", "entries")`)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"
