"""Static findings the patch introduced: the patched tree's findings minus the starting tree's.

Findings are matched by (file, rule, message), counted, not by line: a patch that inserts lines
above an old finding moves it, and a moved finding is not new. Only the changed files are
checked, and the starting tree is checked only for files where the patched tree has findings
(with ruff's correctness gate that is rare), so a clean patch costs one `run_static_checks` call.
"""

from collections import Counter

from agents.failures import FailureClass
from agents.messages.verification import Check, Failure, StaticFinding
from agents.roles.verifier.exec_session import ExecSession
from agents.roles.verifier.exec_session import StaticFinding as Found
from agents.roles.verifier.patchset import join_sections
from agents.roles.verifier.state import Verification
from agents.roles.verifier.tree import apply_patch, restore

STATIC_TIMEOUT_S = 120.0

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


async def check_static(run: Verification, session: ExecSession) -> bool:
    """Static checks of the changed Python files; False when the patch does not compile."""
    paths = [
        c.path
        for c in run.changes
        if c.is_python and c.kind != "deleted" and (run.workspace / c.path).is_file()
    ]
    if not paths:
        run.add_check(Check(name="static", ok=True, summary="no changed Python files"))
        return True
    after = await session.run_static_checks(paths, timeout_s=min(run.timeout_s(), STATIC_TIMEOUT_S))
    unknown = run.known.static_unknown({f.path for f in after.findings})
    if unknown:
        # Which of these findings were there before: check the same files on the starting tree.
        back = [c for c in run.changes if c.path in unknown]
        await restore(run.workspace, back)
        existing = [p for p in unknown if (run.workspace / p).is_file()]
        before = (
            await session.run_static_checks(existing, timeout_s=min(run.timeout_s(), STATIC_TIMEOUT_S))
            if existing
            else None
        )
        await apply_patch(run.workspace, join_sections(back))
        run.known.remember_static(unknown, before.findings if before else [])
    new = introduced(after.findings, run.known.static_before(paths))
    run.failures += as_failures(new)
    syntax = [f for f in new if f.code == "syntax-error"]
    run.add_check(
        Check(
            name="static",
            ok=not new,
            summary=f"{len(paths)} file(s) checked: {len(new)} new finding(s), {len(after.findings) - len(new)} already there",
        )
    )
    return not syntax
