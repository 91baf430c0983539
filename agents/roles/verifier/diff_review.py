"""Reading the patch itself, before anything runs: scope, size, deletions, weakened tests, binary and
generated files, secrets, protected paths. Each finding is a `Failure` with a class and a location.

Which findings are errors: everything that makes a patch unacceptable whatever its tests say
(a secret, a protected path nobody approved, a test skipped or deleted, a binary, any change in
read mode, a patch over the size caps). A protected path a person approved changing (the task's
`approvals`) is judged like any other file; `.git/` and `.codeloop/` stay off limits, since no tool
asks about them: it refuses them. Files outside the plan's files of interest and deleted source files
are warnings: a plan names where to look, not a fence, and removing dead code can be right.
"""

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from agents.failures import FailureClass
from agents.messages.verification import Failure
from agents.roles.verifier.patchset import FileChange
from agents.roles.verifier.secrets import find_secret
from layout import TREE_DIR

PROTECTED_DIRS = (".git/", f"{TREE_DIR}/", ".github/workflows/", ".circleci/", ".gitlab/", ".buildkite/")
PROTECTED_FILES = frozenset(
    {".gitlab-ci.yml", "azure-pipelines.yml", "Jenkinsfile", ".travis.yml", "bitbucket-pipelines.yml"}
)
GENERATED_SUFFIXES = (".pyc", ".pyo", ".so", ".o", ".class", ".whl", ".egg")
GENERATED_DIRS = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build", "dist", ".tox", "node_modules"}
)
TEST_CONFIGS = frozenset({"pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", "noxfile.py", "Makefile"})
"""Files whose options can deselect or skip tests for the whole suite."""
_DESELECT = re.compile(r"(--deselect\b|--ignore(-glob)?\b|(^|\s)-k\s|\bnorecursedirs\b|\bcollect_ignore)")
ASSERTION = re.compile(
    r"^\s*(assert\b|self\.assert\w*\(|pytest\.raises\(|with pytest\.raises\b|\w+\.assert_\w+\()"
)
"""A line that checks something, counted on both sides of a test file."""
BALANCE_MARK = "assertion(s) and adds"
"""In the message of a test file losing assertions on balance (`rewritten_tests` reads it)."""
_TEST_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(test\w*)\s*\(")
_SKIP = re.compile(
    r"(@pytest\.mark\.(skip|skipif|xfail)\b|\bpytest\.(skip|xfail)\(|@unittest\.(skip|skipIf|skipUnless|expectedFailure)\b"
    r"|\bself\.skipTest\(|\bpytestmark\s*=.*\b(skip|xfail)\b|\bcollect_ignore(_glob)?\b|\.add_marker\(.*(skip|xfail))"
)


@dataclass(frozen=True)
class ReviewLimits:
    """Size caps of a patch."""

    max_files: int = 30
    max_changed_lines: int = 2000
    """Added plus removed lines over all files."""


def review_patch(
    changes: list[FileChange],
    *,
    plan_files: list[str],
    mode: str,
    limits: ReviewLimits = ReviewLimits(),
    approved: frozenset[str] = frozenset(),
) -> list[Failure]:
    """The findings of reading `changes` (see the module docstring for which are errors);
    `approved`: protected paths a person approved changing."""
    findings: list[Failure] = []
    if mode == "read":
        findings.append(
            Failure(
                failure_class=FailureClass.PATCH_OUT_OF_SCOPE,
                path=changes[0].path if changes else None,
                message=f"read-mode task changed {len(changes)} file(s); read mode allows no changes",
            )
        )
    changed_lines = sum(len(c.added) + len(c.removed) for c in changes)
    if len(changes) > limits.max_files or changed_lines > limits.max_changed_lines:
        findings.append(
            Failure(
                failure_class=FailureClass.PATCH_TOO_LARGE,
                message=(
                    f"patch changes {len(changes)} files and {changed_lines} lines; "
                    f"caps are {limits.max_files} files and {limits.max_changed_lines} lines"
                ),
            )
        )
    for change in changes:
        findings += _review_file(change, plan_files=plan_files, approved=approved)
    return findings


def _review_file(change: FileChange, *, plan_files: list[str], approved: frozenset[str]) -> list[Failure]:
    found: list[Failure] = []
    paths = {change.path, change.old_path} - {None}
    for path in sorted(p for p in paths if p is not None and _protected(p) and not _approved(p, approved)):
        found.append(
            Failure(
                failure_class=FailureClass.PATCH_PROTECTED_PATH,
                path=path,
                message=f"changes protected path {path}",
            )
        )
    if change.special or change.binary:
        what = f"a {change.special}" if change.special else "a binary file"
        found.append(
            Failure(
                failure_class=FailureClass.PATCH_BINARY, path=change.path, message=f"{change.kind} {what}"
            )
        )
    if _generated(change.path) and change.kind != "deleted":
        found.append(
            Failure(
                failure_class=FailureClass.PATCH_GENERATED,
                path=change.path,
                message="adds or changes a generated file",
            )
        )
    for line_no, text in change.added:
        kind = find_secret(text)
        if kind is not None:
            found.append(
                Failure(
                    failure_class=FailureClass.PATCH_SECRET,
                    path=change.path,
                    line=line_no,
                    message=f"adds what looks like {kind} (value withheld)",
                )
            )
    if change.is_test:
        found += _weakened(change)
    elif PurePosixPath(change.path).name in TEST_CONFIGS:
        found += _deselected(change)
    elif change.kind == "deleted":
        found.append(
            Failure(
                failure_class=FailureClass.PATCH_DELETED_FILE,
                path=change.path,
                message="deletes a source file",
                severity="warning",
            )
        )
    if plan_files and not change.is_test and not _in_plan(change.path, plan_files):
        found.append(
            Failure(
                failure_class=FailureClass.PATCH_OUT_OF_SCOPE,
                path=change.path,
                message="changes a file outside the plan's files of interest",
                severity="warning",
            )
        )
    return found


def _weakened(change: FileChange) -> list[Failure]:
    """Test files deleted, tests removed, skips/xfails added, assertions removed on balance."""
    if change.kind == "deleted":
        return [
            Failure(failure_class=FailureClass.TEST_WEAKENED, path=change.path, message="deletes a test file")
        ]
    found = []
    added_defs = {m[1] for _, t in change.added if (m := _TEST_DEF.match(t))}
    def_lines = {n: m[1] for n, t in change.added if (m := _TEST_DEF.match(t))}
    # A test's `def` line replaced by another test's `def` line, its body kept: a rename.
    renamed = {anchor for new_line, anchor in change.anchors if new_line in def_lines}
    removed_lines = {n for n, _ in change.removed}
    for line_no, text in change.removed:
        match = _TEST_DEF.match(text)
        if not match or match[1] in added_defs or line_no in renamed:
            continue
        # A test rewritten where it stood (the behaviour it checked changed) is shown, not refused:
        # the new test still has to fail without the fix to count as evidence.
        other = written_in_place(line_no, change.anchors, def_lines, removed_lines)
        found.append(
            Failure(
                failure_class=FailureClass.TEST_WEAKENED,
                path=change.path,
                line=line_no,
                message=f"replaces test {match[1]} (line {line_no} of the old file) with {other}"
                if other
                else f"removes test {match[1]} (line {line_no} of the old file)",
                severity="warning" if other else "error",
            )
        )
    removed_skips = sum(1 for _, t in change.removed if _SKIP.search(t))
    skips = [(n, t) for n, t in change.added if _SKIP.search(t)]
    for line_no, text in skips[removed_skips:]:
        found.append(
            Failure(
                failure_class=FailureClass.TEST_WEAKENED,
                path=change.path,
                line=line_no,
                message=f"adds a skip or xfail: {text.strip()[:120]}",
            )
        )
    removed_asserts = [(n, t) for n, t in change.removed if ASSERTION.match(t)]
    added_asserts = sum(1 for _, t in change.added if ASSERTION.match(t))
    if len(removed_asserts) > added_asserts:
        line_no = removed_asserts[0][0]
        found.append(
            Failure(
                failure_class=FailureClass.TEST_WEAKENED,
                path=change.path,
                line=line_no,
                message=(
                    f"removes {len(removed_asserts)} {BALANCE_MARK} {added_asserts} "
                    f"(first removed at line {line_no} of the old file)"
                ),
            )
        )
    return found


def written_in_place(
    line_no: int, anchors: tuple[tuple[int, int], ...], def_lines: dict[int, str], removed: set[int]
) -> str | None:
    """The test added in the same block of removed lines as the test `def` at `line_no` (an added
    line's anchor is the old line before it: the block's last removed line), if any."""
    for new_line, anchor in anchors:
        if new_line in def_lines and anchor >= line_no and removed.issuperset(range(line_no, anchor + 1)):
            return def_lines[new_line]
    return None


def _deselected(change: FileChange) -> list[Failure]:
    """Test configuration that now leaves tests out of the run."""
    return [
        Failure(
            failure_class=FailureClass.TEST_WEAKENED,
            path=change.path,
            line=line_no,
            message=f"test configuration leaves tests out: {text.strip()[:120]}",
        )
        for line_no, text in change.added
        if _DESELECT.search(text)
    ]


def _protected(path: str) -> bool:
    posix = path.lstrip("/")
    parts = PurePosixPath(posix).parts
    return (
        any(part in (".git", TREE_DIR) for part in parts)
        or posix.startswith(PROTECTED_DIRS)
        or (bool(parts) and parts[-1] in PROTECTED_FILES)
    )


def _approved(path: str, approved: frozenset[str]) -> bool:
    """A person approved changing `path`, and it is not codeloop's or git's own."""
    return path in approved and not any(part in (".git", TREE_DIR) for part in PurePosixPath(path).parts)


def _generated(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return path.endswith(GENERATED_SUFFIXES) or any(
        p in GENERATED_DIRS or p.endswith(".egg-info") for p in parts[:-1]
    )


def _in_plan(path: str, plan_files: list[str]) -> bool:
    for planned in plan_files:
        planned = planned.strip("/").split("::")[0]
        if path == planned or path.startswith(planned + "/"):
            return True
    return False
