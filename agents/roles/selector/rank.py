"""Choosing one patch among several candidates for the same task, by what was shown of each.

Every candidate was verified against the same starting tree; the choice goes, in order, by:

1. **Evidence**: `passed` (something that failed because of the task's problem no longer fails)
   before `unverified` (nothing wrong found, nothing shown fixed) before `failed`.
2. **Harm**: fewer regressions, then fewer other errors (static findings, still-failing tests).
3. **Behaviour**: candidates whose observable behaviour (`VerificationReport.behaviour`: the
   outcomes of the tests that execute the change, and what the task's example printed and raised)
   agrees form a cluster, as AlphaCode and CodeT cluster programs by their outputs; a candidate in
   a larger cluster of candidates that changed the behaviour is preferred: independent attempts
   that behave alike are more often right than a lone one.
4. **Agreement**: the candidate whose lines (added and removed, whitespace aside) most resemble
   the other candidates' — majority voting over the patches themselves, in which a `failed`
   candidate has no vote: resembling a patch shown wrong is no merit.
5. **Size**: the smaller patch.

Nothing here knows a system, a repository or an instance: only the candidates' reports and
patches. The `reason` says which step decided, for people and for the trace.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_TIER = {"passed": 2, "unverified": 1, "failed": 0}
RankKey = tuple[int, int, int, int, float, int]
"""Evidence tier, -regressions, -errors, behaviour cluster weight, patch agreement, -size."""


@dataclass(frozen=True)
class Candidate:
    """One patch for the task and what its verification showed."""

    key: str
    """The candidate's name: an attempt number, a predictions file's stem."""
    patch: str
    """The unified diff."""
    verdict: str
    """`passed`, `failed` or `unverified`."""
    evidence_kind: str = "none"
    """What a `passed` rests on (`flip`, `reproduction`, `example`), else `none`."""
    regressions: int = 0
    """Tests that passed on the starting tree and fail with the patch."""
    errors: int = 0
    """Every failure of severity `error` (regressions included)."""
    behaviour: Mapping[str, str] = field(default_factory=dict)
    """Observation -> outcome with the patch (`VerificationReport.behaviour`)."""
    starting: Mapping[str, str] = field(default_factory=dict)
    """The same observations on the starting tree, where its verification knew them
    (`VerificationReport.starting_behaviour`)."""


@dataclass(frozen=True)
class Choice:
    """The chosen candidate, why, and what the ranking saw."""

    chosen: str
    """The chosen candidate's key."""
    reason: str
    """One line: which step of the ranking decided, and on what."""
    order: list[str]
    """Every candidate's key, best first."""
    clusters: dict[str, int]
    """Candidate key -> behaviour cluster number (1 is the largest); absent when it has no
    observations shared with another candidate."""


def choose(candidates: Sequence[Candidate], starting: Mapping[str, str] | None = None) -> Choice:
    """Rank `candidates` (at least one) as the module docstring says. `starting`: the starting
    tree's behaviour on the same observations (default: what the candidates' own verifications saw
    of it, `Candidate.starting`) — a candidate that matches it on every
    observation changed nothing observable and lends no weight to its cluster."""
    if not candidates:
        raise ValueError("choose() needs at least one candidate")
    if starting is None:  # every candidate started from the same tree: what each saw of it
        starting = {k: v for c in candidates for k, v in c.starting.items()}
    clusters = _clusters(candidates, starting)
    weight = _cluster_weights(candidates, clusters, starting)
    agreement = {c.key: _agreement(c, candidates) for c in candidates}

    def rank(c: Candidate) -> RankKey:
        return (
            _TIER.get(c.verdict, 0),
            -c.regressions,
            -c.errors,
            weight.get(c.key, 0),
            agreement[c.key],
            -_size(c.patch),
        )

    ordered = sorted(candidates, key=rank, reverse=True)
    best = ordered[0]
    return Choice(
        chosen=best.key,
        reason=_reason(ordered, [rank(c) for c in ordered], weight, agreement),
        order=[c.key for c in ordered],
        clusters=clusters,
    )


def _agree(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    shared = a.keys() & b.keys()
    return bool(shared) and all(a[k] == b[k] for k in shared)


def _clusters(candidates: Sequence[Candidate], starting: Mapping[str, str]) -> dict[str, int]:
    """Candidates whose behaviour agrees on every observation they share, grouped (each joins the
    first group whose first member it agrees with); numbered by size, largest first."""
    groups: list[list[Candidate]] = []
    for c in candidates:
        if not c.behaviour:
            continue
        for group in groups:
            if _agree(group[0].behaviour, c.behaviour):
                group.append(c)
                break
        else:
            groups.append([c])
    groups.sort(key=len, reverse=True)
    return {c.key: n for n, group in enumerate(groups, start=1) for c in group}


def _changed(c: Candidate, starting: Mapping[str, str]) -> bool:
    """The candidate behaves differently from the starting tree somewhere (unknown: assume so)."""
    shared = c.behaviour.keys() & starting.keys()
    return (
        not shared
        or any(c.behaviour[k] != starting[k] for k in shared)
        or bool(c.behaviour.keys() - starting.keys())
    )


def _cluster_weights(
    candidates: Sequence[Candidate], clusters: dict[str, int], starting: Mapping[str, str]
) -> dict[str, int]:
    """Per candidate: how many candidates that changed the behaviour share its cluster (0 for one
    that changed nothing observable, or has no observations)."""
    sizes: dict[int, int] = {}
    for c in candidates:
        if c.key in clusters and _changed(c, starting):
            sizes[clusters[c.key]] = sizes.get(clusters[c.key], 0) + 1
    return {
        c.key: sizes.get(clusters[c.key], 0) if _changed(c, starting) else 0
        for c in candidates
        if c.key in clusters
    }


def _lines(patch: str) -> set[tuple[str, str]]:
    """The patch as (file, +/- and the line without whitespace) pairs."""
    lines: set[tuple[str, str]] = set()
    path = ""
    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip().removeprefix("b/")
        elif line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            text = "".join(line[1:].split())
            if text:
                lines.add((path, line[0] + text))
    return lines


def _agreement(c: Candidate, candidates: Sequence[Candidate]) -> float:
    """Mean Jaccard similarity of `c`'s lines to the other candidates' that were not `failed`
    (0 with none)."""
    mine = _lines(c.patch)
    others = [_lines(o.patch) for o in candidates if o.key != c.key and o.verdict != "failed"]
    if not others:
        return 0.0
    scores = [len(mine & o) / len(mine | o) if mine | o else 1.0 for o in others]
    return round(sum(scores) / len(scores), 3)


def _size(patch: str) -> int:
    return len(_lines(patch))


def _reason(
    ordered: list[Candidate], keys: list[RankKey], weight: dict[str, int], agreement: dict[str, float]
) -> str:
    """The steps of the ranking that set the chosen candidate apart, in order: each step that
    put behind it a candidate tied with it on the steps before."""
    best = ordered[0]
    head = best.verdict + (f" (evidence: {best.evidence_kind})" if best.verdict == "passed" else "")
    if len(ordered) == 1:
        return f"the only candidate: {head}"
    words = [
        lambda: f"the others are {', '.join(sorted({c.verdict for c in ordered[1:]}))}",
        lambda: f"{best.regressions} regression(s), fewer than others",
        lambda: f"{best.errors} error(s), fewer than others",
        lambda: (
            f"behaves like {weight[best.key] - 1} other candidate(s) that changed the behaviour (the largest such cluster)"
        ),
        lambda: f"its patch agrees most with the others (similarity {agreement[best.key]:.2f})",
        lambda: "the smallest patch",
    ]
    tied = list(range(1, len(ordered)))
    said: list[str] = []
    for step, word in enumerate(words):
        behind = [i for i in tied if keys[i][step] < keys[0][step]]
        if behind:
            said.append(word())
            tied = [i for i in tied if i not in behind]
        if not tied:
            break
    if tied:
        said.append(f"tied with {ordered[tied[0]].key} on everything, the first given")
    return f"{head}; " + "; ".join(said)
