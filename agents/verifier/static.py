"""Static findings the patch introduced: the patched tree's findings minus the starting tree's.

Findings are matched by (file, rule, message), counted, not by line: a patch that inserts lines
above an old finding moves it, and a moved finding is not new. Only the changed files are
checked, and the starting tree is checked only for files where the patched tree has findings
(with ruff's correctness gate that is rare), so a clean patch costs one `run_static_checks` call.
"""

from collections import Counter

from agents.failures import FailureClass
from agents.verifier.exec_session import StaticFinding as Found
from agents.verifier.report import Failure, StaticFinding

SYNTAX_ERROR = "syntax-error"


def _key(path: str, code: str, message: str) -> tuple[str, str, str]:
    return (path, code, message)


def introduced(after: list[Found], before: list[StaticFinding]) -> list[Found]:
    """The findings of `after` beyond those `before` already had."""
    old = Counter(_key(f.path, f.code, f.message) for f in before)
    new = []
    for finding in after:
        key = _key(finding.path, finding.code, finding.message)
        if old[key] > 0:
            old[key] -= 1
        else:
            new.append(finding)
    return new


def as_failures(findings: list[Found]) -> list[Failure]:
    """`static.syntax` for what does not parse, `static.lint` for the rest."""
    return [
        Failure(
            failure_class=FailureClass.STATIC_SYNTAX if f.code == SYNTAX_ERROR else FailureClass.STATIC_LINT,
            path=f.path,
            line=f.line or None,
            message=f"{f.code}: {f.message}" if f.code != SYNTAX_ERROR else f.message,
        )
        for f in findings
    ]


def to_baseline(findings: list[Found]) -> list[StaticFinding]:
    return [StaticFinding(path=f.path, line=f.line, code=f.code, message=f.message) for f in findings]
