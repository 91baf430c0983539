"""Words a person reads: counts (`1 file`, `2 files`, `0 files`, never `1 files`) and text cut to
one line of a given length."""


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """`number` and `noun`, the noun in the plural unless `number` is exactly 1 (`plural` when
    adding an `s` is wrong: `counted(2, "entry", "entries")`)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def one_line(text: str, limit: int) -> str:
    """`text` on one line (its whitespace runs made single spaces), cut to `limit` characters with
    `...` when longer."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
