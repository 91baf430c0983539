"""The runnable statements of an issue: interpreter sessions and code blocks, without their output;
and the output a session shows for each prompted expression (`shown_outputs`).

Pure text work. A session block keeps only its prompted lines (`>>> `, `... `, `In [3]: `,
IPython's `...: `); a fenced block without prompts is kept whole unless it is a traceback or
printed output (a block that does not parse as Python is left to the tracer, which runs the lines
of it that do). Prompted lines in the prose outside fences form one more block.
"""

import ast
import re

MAX_EXAMPLE_CHARS = 20_000
"""Examples longer than this are cut: a reproduction is a few lines; a pasted log is not code."""

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_PROMPT = re.compile(r"^[ \t]*(?:>>>|\.\.\.|In \[\d+\]:|\.\.\.+:)(?: |$)(.*)$")
_NOT_CODE = re.compile(r"^[ \t]*(?:Traceback \(most recent call last\)|Out\[\d+\]:)", re.M)


def example_blocks(text: str) -> list[str]:
    """Code blocks to run, in the order the issue shows them."""
    text = text.replace("\r\n", "\n")[: MAX_EXAMPLE_CHARS * 10]
    blocks: list[str] = []
    for match in _FENCE.finditer(text):
        block = _code_of(match.group(2), fenced=True)
        if block:
            blocks.append(block)
    outside = _code_of(_FENCE.sub("\n", text), fenced=False)
    if outside:
        blocks.append(outside)
    return _capped(blocks)


def _code_of(block: str, *, fenced: bool) -> str | None:
    lines = block.split("\n")
    prompted = [m.group(1) for m in map(_PROMPT.match, lines) if m]
    if prompted:
        return "\n".join(prompted) if any(line.strip() for line in prompted) else None
    if not fenced or _NOT_CODE.search(block) or not block.strip():
        return None
    return block if _looks_like_code(block) else None


def _looks_like_code(block: str) -> bool:
    """Parses as Python, or has at least one line that does and calls or assigns something (a
    fenced block of printed output, `[1, 2]` or `x + 1`, runs nothing worth tracing)."""
    try:
        tree = ast.parse(block)
    except SyntaxError:
        return any(_runs_something(line) for line in block.split("\n"))
    return any(_acts(node) for node in tree.body)


def _runs_something(line: str) -> bool:
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return False
    return any(_acts(node) for node in tree.body)


def _acts(node: ast.stmt) -> bool:
    return not isinstance(node, ast.Expr) or any(isinstance(n, ast.Call) for n in ast.walk(node))


def _capped(blocks: list[str]) -> list[str]:
    kept, used = [], 0
    for block in blocks:
        if used + len(block) > MAX_EXAMPLE_CHARS:
            break
        kept.append(block)
        used += len(block)
    return kept


_SHOWN_ERROR = re.compile(
    r"^[ \t]*(?:E[ \t]+)?(?:[\w.]+\.)?(\w*(?:Error|Exception|Warning|Exit|Interrupt))\b(?::|$)", re.M
)


def shown_exceptions(text: str) -> set[str]:
    """The exception type names the issue shows raised (`ValueError: ...`, a traceback's last
    line, pytest's `E   TypeError`), without their modules."""
    return {m.group(1) for m in _SHOWN_ERROR.finditer(text.replace("\r\n", "\n"))}


def shown_outputs(text: str) -> dict[str, str]:
    """Per one-line expression typed at a session prompt (`>>> f(2)`), the output the issue shows
    under it, whitespace collapsed; expressions with no output shown are left out."""
    shown: dict[str, str] = {}
    lines = text.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines):
        match = _PROMPT.match(line)
        if not match or not line.lstrip().startswith((">>>", "In [")):
            continue
        source = match.group(1).strip()
        if not source or (
            i + 1 < len(lines) and _PROMPT.match(lines[i + 1]) and lines[i + 1].lstrip().startswith("...")
        ):
            continue  # a statement that goes on over more lines
        output = []
        for after in lines[i + 1 :]:
            if not after.strip() or _PROMPT.match(after) or after.strip().startswith(("```", "~~~")):
                break
            output.append(after.strip())
        if output and not output[0].startswith("Traceback"):
            shown[" ".join(source.split())] = " ".join(" ".join(output).split())
    return shown
