"""The context builder: goal, constraints, latest observations and the best snippets, packed
into a token budget for an agent's prompt.

Order of claim on the budget: the goal, then the constraints (both are the task: they always go
in, cut at whole lines only if they alone overflow), then the newest observations up to
`observation_share` of the budget (what just happened matters more than what happened first),
then snippets in rank order with whatever is left. Snippets of one file that overlap or touch are
merged first, so no line is paid for twice; a snippet that does not fit whole keeps its leading
whole lines if at least `MIN_SNIPPET_LINES` fit, and is otherwise skipped for a smaller one.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agents.messages import Snippet as ContextSnippet

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """One token per 4 characters (the usual ratio of BPE tokenizers on English and code), rounded
    up, and at least one per line because every newline costs one: the packer does not know which
    model will read the context."""
    if not text:
        return 0
    return max(-(-len(text) // 4), text.count("\n") + 1)


@dataclass(frozen=True)
class SearchHit:
    """A retrieved chunk as `search_code` returns it (the `codeloop search --json` hit shape)."""

    path: str
    start_line: int
    end_line: int
    symbol: str | None
    score: float
    snippet: str


@dataclass(frozen=True)
class ContextPack:
    """Goal, constraints, observations and code packed into a token budget for an agent."""

    text: str
    tokens: int
    budget: int
    snippets: list[ContextSnippet]
    observations_included: int
    dropped_snippets: int


MIN_SNIPPET_LINES = 3
# Parts are joined by a blank line; each part is charged for it, so the sum bounds the whole
# (the estimate is subadditive: the cost of a concatenation never exceeds the sum of the costs).
_SEP = "\n\n"


@dataclass
class _Merged:
    path: str
    rank: int
    lines: dict[int, str] = field(default_factory=dict)
    symbols: list[str] = field(default_factory=list)


def merge_snippets(hits: Sequence[SearchHit]) -> list[ContextSnippet]:
    """Merge hits of the same file whose line ranges overlap or touch; keep the best rank's order."""
    groups: list[_Merged] = []
    for rank, hit in enumerate(hits):
        lines = dict(enumerate(hit.snippet.split("\n"), start=hit.start_line))
        touching = [g for g in groups if g.path == hit.path and _touches(g, hit.start_line, hit.end_line)]
        target = touching[0] if touching else _Merged(hit.path, rank)
        for other in touching[1:]:  # this hit bridges two earlier groups
            target.lines |= other.lines
            target.symbols += [s for s in other.symbols if s not in target.symbols]
            groups.remove(other)
        target.lines |= lines
        if hit.symbol and hit.symbol not in target.symbols:
            target.symbols.append(hit.symbol)
        if not touching:
            groups.append(target)
    out = []
    for g in sorted(groups, key=lambda g: g.rank):
        numbers = sorted(g.lines)
        # Gaps inside a merged group cannot occur: only touching ranges merge.
        out.append(
            ContextSnippet(
                path=g.path,
                start_line=numbers[0],
                end_line=numbers[-1],
                symbols=g.symbols,
                text="\n".join(g.lines[n] for n in numbers),
                truncated=False,
            )
        )
    return out


def _touches(group: _Merged, start: int, end: int) -> bool:
    first, last = min(group.lines), max(group.lines)
    return start <= last + 1 and end >= first - 1


def build_context(
    *,
    goal: str,
    snippets: Sequence[SearchHit],
    token_budget: int,
    constraints: Sequence[str] = (),
    observations: Sequence[str] = (),
    observation_share: float = 0.3,
    count_tokens: TokenCounter = estimate_tokens,
) -> ContextPack:
    """Pack a prompt context. `observations` are oldest first; `snippets` best first."""
    parts: list[str] = []
    used = 0

    def fits(text: str) -> bool:
        return used + count_tokens(text + _SEP) <= token_budget

    def add(text: str) -> None:
        nonlocal used
        parts.append(text)
        used += count_tokens(text + _SEP)

    task = "## Goal\n" + goal.strip()
    if constraints:
        task += "\n\n## Constraints\n" + "\n".join(f"- {c.strip()}" for c in constraints)
    add(_leading_lines(task, token_budget, count_tokens))

    observed: list[str] = []
    cap = used + int(token_budget * observation_share)
    header_cost = count_tokens("## Latest observations\n" + _SEP)
    for note in reversed(observations):
        block = note.strip()
        cost = sum(count_tokens(b + _SEP) for b in [*observed, block]) + header_cost
        if used + cost <= min(cap, token_budget):
            observed.insert(0, block)
        else:
            break
    if observed:
        add("## Latest observations\n" + "\n\n".join(observed))

    placed: list[ContextSnippet] = []
    dropped = 0
    code_header = "## Code"
    if snippets and fits(code_header):
        add(code_header)
    for snippet in merge_snippets(snippets):
        block = _render(snippet)
        if fits(block):
            add(block)
            placed.append(snippet)
            continue
        cut = _trim(snippet, token_budget - used, count_tokens)
        if cut is None:
            dropped += 1
            continue
        add(_render(cut))
        placed.append(cut)
    if not placed and parts and parts[-1] == code_header:
        parts.pop()
    text = _SEP.join(parts)
    return ContextPack(
        text=text,
        tokens=count_tokens(text),
        budget=token_budget,
        snippets=placed,
        observations_included=len(observed),
        dropped_snippets=dropped,
    )


def _render(s: ContextSnippet) -> str:
    label = f" ({', '.join(s.symbols)})" if s.symbols else ""
    more = "\n# ... (cut to fit the budget)" if s.truncated else ""
    return f"### {s.path}:{s.start_line}-{s.end_line}{label}\n```\n{s.text}{more}\n```"


def _trim(snippet: ContextSnippet, room: int, count_tokens: TokenCounter) -> ContextSnippet | None:
    """The longest run of leading whole lines that fits `room`, or None if under the minimum."""
    lines = snippet.text.split("\n")
    lo, hi = 0, len(lines) - 1  # binary search on how many lines to keep
    best = None
    while lo <= hi:
        keep = (lo + hi) // 2 + 1
        cut = snippet.model_copy(
            update={
                "text": "\n".join(lines[:keep]),
                "end_line": snippet.start_line + keep - 1,
                "truncated": True,
            }
        )
        if count_tokens(_render(cut) + _SEP) <= room:
            best, lo = cut, keep
        else:
            hi = keep - 2
    if best is None or best.end_line - best.start_line + 1 < MIN_SNIPPET_LINES:
        return None
    return best


def _leading_lines(text: str, budget: int, count_tokens: TokenCounter) -> str:
    """`text` or its leading whole lines that fit `budget`."""
    if count_tokens(text + _SEP) <= budget:
        return text
    kept: list[str] = []
    for line in text.split("\n"):
        if count_tokens("\n".join([*kept, line]) + _SEP) > budget:
            break
        kept.append(line)
    return "\n".join(kept)
