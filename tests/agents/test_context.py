"""The context builder : goal, constraints, latest observations and the best
snippets in a token budget, overlapping snippets merged, never a snippet cut mid-line."""

from pathlib import Path

import anyio
import pytest

from agents.roles.context import SearchHit, build_context, estimate_tokens, merge_snippets

SOURCE = (Path(anyio.__file__).parent / "_core" / "_tasks.py").read_text().splitlines()


def _hit(start: int, end: int, *, path: str = "_core/_tasks.py", symbol: str | None = None) -> SearchHit:
    return SearchHit(
        path=path,
        start_line=start,
        end_line=end,
        symbol=symbol,
        score=1.0,
        snippet="\n".join(SOURCE[start - 1 : end]),
    )


def test_overlapping_and_touching_snippets_of_one_file_merge_into_one() -> None:
    """Lines shared by two hits appear once; separate files and distant ranges stay apart."""
    merged = merge_snippets(
        [
            _hit(10, 30, symbol="a"),
            _hit(60, 70),
            _hit(25, 40, symbol="b"),
            _hit(41, 45),
            _hit(10, 20, path="other.py"),
        ]
    )
    assert [(s.path, s.start_line, s.end_line) for s in merged] == [
        ("_core/_tasks.py", 10, 45),
        ("_core/_tasks.py", 60, 70),
        ("other.py", 10, 20),
    ]
    assert merged[0].text == "\n".join(SOURCE[9:45]) and merged[0].symbols == ["a", "b"]


@pytest.mark.parametrize("budget", [60, 150, 400, 900, 3000, 50_000])
def test_the_pack_fits_the_budget_and_every_snippet_line_is_a_whole_source_line(budget: int) -> None:
    """Whatever the budget, the text fits it and snippets hold only whole lines of the file."""
    hits = [_hit(s, s + 35) for s in range(1, len(SOURCE) - 40, 45)]
    pack = build_context(
        goal="Make move_on_after accept a deadline.",
        constraints=["Do not change the public API."],
        observations=["pytest: 3 failed", "ruff: clean"],
        snippets=hits,
        token_budget=budget,
    )
    assert pack.tokens <= budget and estimate_tokens(pack.text) == pack.tokens
    assert "Make move_on_after accept a deadline." in pack.text
    for snippet in pack.snippets:
        assert snippet.text.split("\n") == SOURCE[snippet.start_line - 1 : snippet.end_line]
        assert snippet.text in pack.text
    assert len(pack.snippets) + pack.dropped_snippets <= len(hits)
    if budget == 50_000:  # room for everything: nothing cut, nothing dropped
        assert len(pack.snippets) == len(hits) and not any(s.truncated for s in pack.snippets)


def test_a_snippet_too_large_for_the_room_left_is_cut_at_a_line_boundary_and_marked() -> None:
    """Better the head of the best function than nothing; the cut is visible to the reader."""
    pack = build_context(goal="Fix it.", snippets=[_hit(1, 200)], token_budget=300)
    (snippet,) = pack.snippets
    assert snippet.truncated and 1 < snippet.end_line < 200
    assert "# ... (cut to fit the budget)" in pack.text


def test_the_newest_observations_win_when_not_all_fit() -> None:
    """Observations arrive oldest first; the budget keeps the most recent ones, in order."""
    observations = [f"step {i}: " + "detail " * 30 for i in range(10)]
    pack = build_context(goal="Goal.", snippets=[], observations=observations, token_budget=400)
    assert 0 < pack.observations_included < 10
    kept = observations[-pack.observations_included :]
    assert all(o.strip() in pack.text for o in kept)
    assert observations[0].strip() not in pack.text
    assert pack.text.index(kept[0].strip()) < pack.text.index(kept[-1].strip())
