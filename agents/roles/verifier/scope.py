"""Which tests the starting tree's coverage run measures: the whole suite, or, in a suite too large
to run whole within a verification, the tests of the changed code's packages.

The coverage run (`measure`) finds every test that executes the changed code by running the suite
once on the starting tree. In a repository of a few hundred test modules (a computer algebra
system's, say) one run of the suite takes longer than a verification's deadline, and the run
would be cut short without having measured anything. There the run is scoped: the test modules
under the directory of each changed source file (its package, with its sub-packages), the modules
beside it in a top-level package's own `tests/` directory, and the modules that import a changed
module by name. Tests elsewhere are not run on either tree; the report says so (a regression that
only a far-away test shows goes unseen, which the report's check states).
"""

import hashlib
from dataclasses import dataclass
from pathlib import PurePosixPath

from agents.roles.verifier.patchset import FileChange

MAX_WHOLE_SUITE_FILES = 300
"""Test modules up to which the coverage run is the whole suite."""


@dataclass(frozen=True)
class MeasuredScope:
    """What the starting tree's coverage run runs."""

    files: tuple[str, ...] | None
    """The test modules it runs; None: the whole suite."""
    suite_files: int
    """Test modules in the repository."""

    @property
    def whole(self) -> bool:
        return self.files is None

    def cache_key(self, tree: str) -> str:
        """The coverage cache's key for this scope on the starting tree `tree`."""
        if self.files is None:
            return tree
        digest = hashlib.sha256("\n".join(self.files).encode()).hexdigest()[:16]
        return f"{tree}-{digest}"

    def describe(self) -> str:
        if self.files is None:
            return "the suite"
        return (
            f"the tests of the changed packages ({len(self.files)} of {self.suite_files} test modules: "
            f"the suite is too large to run whole)"
        )


def changed_sources(changes: list[FileChange]) -> list[str]:
    """The changed Python files that are not tests: what the coverage run measures."""
    return [c.path for c in changes if c.is_python and not c.is_test]


def measured_scope(sources: list[str], every: list[str], related: list[str]) -> MeasuredScope:
    """The scope of the coverage run for the changed source files `sources`, given the
    repository's test modules `every` and those that import a changed module (`related`)."""
    if len(every) <= MAX_WHOLE_SUITE_FILES:
        return MeasuredScope(files=None, suite_files=len(every))
    prefixes: set[str] = set()
    for path in sources:
        parent = PurePosixPath(path).parent
        if len(parent.parts) >= 2:
            prefixes.add(f"{parent}/")
        elif parent.parts:  # a module of a top-level package: only that package's own tests/
            prefixes.add(f"{parent}/tests/")
    chosen = [f for f in every if any(f.startswith(p) for p in prefixes)]
    chosen += [f for f in related if f not in chosen]
    return MeasuredScope(files=tuple(sorted(chosen)), suite_files=len(every))
