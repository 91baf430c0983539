"""The ranking of candidates for one task: evidence first, then harm, behaviour, agreement, size."""

import pytest

from agents.roles.selector.rank import Candidate, choose


def _patch(path: str, *added: str) -> str:
    body = "".join(f"+{line}\n" for line in added)
    return f"--- a/{path}\n+++ b/{path}\n@@ -1,1 +1,{len(added) + 1} @@\n x = 1\n{body}"


def test_a_passed_candidate_beats_unverified_and_failed_ones_whatever_their_size() -> None:
    choice = choose(
        [
            Candidate("small-failed", _patch("a.py", "y = 2"), "failed", regressions=1, errors=1),
            Candidate("unverified", _patch("a.py", "y = 3"), "unverified"),
            Candidate("passed", _patch("a.py", "y = 4", "z = 5", "w = 6"), "passed", evidence_kind="flip"),
        ]
    )
    assert choice.chosen == "passed"
    assert choice.order == ["passed", "unverified", "small-failed"]
    assert "evidence: flip" in choice.reason


def test_fewer_regressions_decide_between_failed_candidates() -> None:
    choice = choose(
        [
            Candidate("two", _patch("a.py", "y = 2"), "failed", regressions=2, errors=2),
            Candidate("one", _patch("a.py", "y = 3"), "failed", regressions=1, errors=3),
        ]
    )
    assert choice.chosen == "one"
    assert "regression" in choice.reason


def test_the_largest_cluster_of_candidates_that_behave_alike_is_chosen() -> None:
    right = {"example": "printed 10", "tests/test_a.py::test_x": "passed"}
    wrong = {"example": "printed 9", "tests/test_a.py::test_x": "passed"}
    starting = {"example": "raised ZeroDivisionError", "tests/test_a.py::test_x": "passed"}
    candidates = [
        Candidate("lone", _patch("a.py", "return 9"), "unverified", behaviour=wrong),
        Candidate("first", _patch("a.py", "return 10"), "unverified", behaviour=right),
        Candidate("second", _patch("b.py", "total = 10"), "unverified", behaviour=right),
        Candidate("same-as-before", _patch("c.py", "pass"), "unverified", behaviour=starting),
    ]
    choice = choose(candidates, starting=starting)
    assert choice.chosen in {"first", "second"}
    assert choice.clusters["first"] == choice.clusters["second"] == 1
    assert choice.clusters["lone"] != choice.clusters["first"]
    assert "behaves like 1 other" in choice.reason


def test_candidates_that_changed_nothing_observable_lend_no_weight() -> None:
    starting = {"example": "raised KeyError"}
    choice = choose(
        [
            Candidate("inert-1", _patch("a.py", "pass"), "unverified", behaviour=starting),
            Candidate("inert-2", _patch("a.py", "pass  # again"), "unverified", behaviour=starting),
            Candidate(
                "fix", _patch("a.py", "return d.get(k)"), "unverified", behaviour={"example": "printed None"}
            ),
        ],
        starting=starting,
    )
    assert choice.chosen == "fix"
    # Without `starting` given, what the candidates' verifications saw of the starting tree serves.
    seen = [
        Candidate(c, _patch("a.py", c), "unverified", behaviour=starting, starting=starting)
        for c in ("inert-1", "inert-2")
    ]
    fix = Candidate(
        "fix", _patch("a.py", "return d.get(k)"), "unverified", behaviour={"example": "printed None"}
    )
    assert choose([*seen, fix]).chosen == "fix"


def test_without_behaviour_the_patch_most_like_the_others_wins_then_the_smallest() -> None:
    common = ("if n < 0:", "    raise ValueError(n)")
    choice = choose(
        [
            Candidate("odd", _patch("a.py", "n = abs(n)"), "unverified"),
            Candidate("majority-long", _patch("a.py", *common, "log(n)"), "unverified"),
            Candidate("majority", _patch("a.py", *common), "unverified"),
        ]
    )
    assert choice.chosen == "majority"
    assert "agrees most" in choice.reason
    tie = choose(
        [
            Candidate("big", _patch("a.py", "a", "b"), "unverified"),
            Candidate("small", _patch("b.py", "c"), "unverified"),
        ]
    )
    assert tie.chosen == "small"


def test_one_candidate_is_chosen_as_the_only_one_and_none_is_an_error() -> None:
    assert choose([Candidate("only", _patch("a.py", "x"), "failed")]).reason.startswith("the only candidate")
    with pytest.raises(ValueError):
        choose([])


def test_a_failed_candidate_has_no_vote_in_the_patches_agreement() -> None:
    """Two passed candidates edit the bug differently; a failed one removes the same line as the
    larger of them: resembling a patch shown wrong is no merit, so the smaller passed one wins."""

    def _replace(removed: str, *added: str) -> str:
        body = f"-{removed}\n" + "".join(f"+{line}\n" for line in added)
        return f"--- a/s.py\n+++ b/s.py\n@@ -1,2 +1,{len(added) + 1} @@\n x = 1\n{body}"

    choice = choose(
        [
            Candidate(
                "like-the-failed", _replace("b = hi - lo", "b = int(hi) - int(lo)", "a = lo"), "passed"
            ),
            Candidate("failed", _replace("b = hi - lo", "b = 1"), "failed", errors=1),
            Candidate("smaller", _patch("s.py", "data = data.astype(int)"), "passed"),
        ]
    )
    assert choice.chosen == "smaller"
    assert "the smallest patch" in choice.reason
