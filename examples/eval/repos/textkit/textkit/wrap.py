"""Greedy word wrapping for plain-text e-mails."""


def wrap_words(text: str, width: int) -> list[str]:
    """Lines of at most `width` characters; a word longer than `width` gets a line of its own."""
    if width < 1:
        raise ValueError("width must be at least 1")
    lines: list[str] = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) < width:
            current = f"{current} {word}"
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def indent(lines: list[str], prefix: str = "> ") -> list[str]:
    """Quote lines for a reply, keeping empty lines unprefixed."""
    return [prefix + line if line else line for line in lines]
