"""The built-in `selector` role: the `select` stage's choice by `rank.choose`, from what each
attempt's verification showed (its verdict and evidence, regressions and other errors, observed
behaviour) and from the patches themselves. It runs no model and no tool."""

from agents.messages import Attempt, SelectRequest, SelectResult
from agents.roles.selector.rank import Candidate, choose


def candidate_of(attempt: Attempt) -> Candidate:
    """The ranking's view of one attempt; an attempt never verified ranks as `unverified`."""
    report = attempt.report
    if report is None:
        return Candidate(key=str(attempt.attempt), patch=attempt.patch or "", verdict="unverified")
    return Candidate(
        key=str(attempt.attempt),
        patch=attempt.patch or "",
        verdict=report.verdict,
        evidence_kind=report.evidence_kind,
        regressions=len(report.regressions),
        errors=len(report.errors),
        behaviour=dict(report.behaviour),
    )


def select(request: SelectRequest) -> SelectResult:
    """Rank the request's candidates and choose the first."""
    choice = choose([candidate_of(c) for c in request.candidates])
    return SelectResult(
        step_id=request.step_id,
        chosen=int(choice.chosen),
        reason=choice.reason,
        order=[int(key) for key in choice.order],
        clusters={int(key): n for key, n in choice.clusters.items()},
    )
