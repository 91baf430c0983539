"""URL slugs: lower case ASCII words joined by hyphens."""

import re
import unicodedata

_NOT_WORD = re.compile(r"[^a-z0-9]+")


def slugify(text: str, *, max_length: int = 60) -> str:
    """`"Crème Brûlée!"` -> `"creme-brulee"`; accents are folded to ASCII, never dropped."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_WORD.sub("-", folded.lower()).strip("-")
    if len(slug) > max_length:
        slug = slug[:max_length].rsplit("-", 1)[0]
    return slug


def unique_slug(text: str, taken: set[str]) -> str:
    """A slug not in `taken`, numbered from 2 when the plain one is used."""
    base = slugify(text)
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    return slug
