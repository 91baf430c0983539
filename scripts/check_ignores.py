"""Every `# type: ignore[...]` and `# pyright: ignore[...]` names what it silences and says why.

Run by `make lint` (and the pre-commit hook). The accepted shape is the ignore with its rule in
brackets, then the reason in the same comment:

    value = thing()  # pyright: ignore[reportAttributeAccessIssue] - nats-py declares no such attribute

A bare ignore, or one without a reason of at least two words, is reported as `path:line: text`
and the script exits 1.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", "node_modules", "__pycache__", ".codeloop", "build", "dist", ".git"}
IGNORE = re.compile(r"(?:type|pyright):\s*ignore\b")
WITH_REASON = re.compile(r"(?:type|pyright):\s*ignore\[[^\]]+\]\s*[-:#—]*\s*(?P<reason>.*)$")


def bare_ignores(path: Path) -> Iterator[tuple[int, str]]:
    """(line, comment) of each ignore comment in `path` that lacks its rule or its reason."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT or not IGNORE.search(token.string):
            continue
        match = WITH_REASON.search(token.string)
        if match is None or len(match.group("reason").split()) < 2:
            yield token.start[0], token.string


def main(argv: list[str]) -> int:
    """Check the files named in `argv` (default: every Python file of the repository)."""
    if argv:
        paths = [Path(a) for a in argv if a.endswith(".py")]
    else:
        paths = [
            p for p in sorted(ROOT.rglob("*.py")) if not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)
        ]
    found = 0
    for path in paths:
        for line, comment in bare_ignores(path):
            shown = path.relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
            print(f"{shown}:{line}: {comment}")
            found += 1
    if found:
        print(
            f"{found} ignore comment(s) without a rule and a reason: write "
            "`# pyright: ignore[rule] - why the checker is wrong here`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
