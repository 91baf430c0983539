"""The task's example as a reproduction: run on the starting tree and with the patch, compared.

Most issues show code: a session (`>>> f(0)`), a script, the traceback it gave. In execute mode
the verifier runs that code statement by statement in the sandbox with the project's interpreter
(the exec server's `run_example`) on the starting tree — once per tree and text, kept in the
verifier's cache — and on the patched tree, and compares statement by statement:

- **Reproduced**: on the starting tree a statement raised in the repository's code an exception
  the text shows (any, when the text names none; or one raised from such an exception, as a
  project wraps an error in its own), not an ImportError (a missing dependency is the
  environment's); or printed exactly the output the text shows under it — the wrong output the
  issue reports.
- **Fixed** (evidence, `example`): every reproduced statement now runs without raising and, for a
  shown output, prints something else; no statement that ran clean before raises in the
  repository now; the run did not time out. Where nothing reproduced, a session expression whose
  output differed from what the text shows under it (or that raised) and now prints exactly that
  is fixed too: the text showed the output it expects.
- **Still failing** (`example.still_failing`, sent back to the coder): a reproduced statement
  raises the same exception, message and all, or prints the same wrong output.
- **Broken** (`example.regression`): a statement that ran clean before raises in the repository.

Anything else (nothing reproduced on the starting tree, the run did not happen) shows nothing.
What the patched run did is also the candidate's observable behaviour on the example
(`behaviour_of`), by which candidates for one task are clustered (`agents.roles.selector.rank`).
"""

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from agents.roles.verifier.exec_session import ExampleRun, StatementRun

EXAMPLE_TIMEOUT_S = 60.0
"""The example's statements' time on each tree."""
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


@dataclass(frozen=True)
class TaskExample:
    """What the verifier needs to run the task's example."""

    text: str
    """The task's text, whose sessions and code blocks are the example."""


@dataclass(frozen=True)
class Comparison:
    """What the example shows about the patch."""

    outcome: str
    """`fixed`, `still_failing`, `broken` or `nothing`."""
    line: str
    """One line for people: which statement, what it did before and with the patch."""


def normalized(text: str) -> str:
    """Output as two runs of the same code compare it: addresses blanked, whitespace collapsed."""
    return " ".join(_ADDRESS.sub("0x#", text).split())


def _reproduced(before: StatementRun, shown: set[str]) -> bool:
    if before.raised is not None:
        kinds = {before.raised.split(":")[0], *before.causes}
        return before.in_repository and not before.import_error and (not shown or bool(kinds & shown))
    return before.shown_output is not None and normalized(before.output) == normalized(before.shown_output)


def _now_as_shown(before: StatementRun, after: StatementRun) -> bool:
    """An expression printing, with the patch and not before it, the output the text shows."""
    if after.shown_output is None or after.raised is not None:
        return False
    shown = normalized(after.shown_output)
    return normalized(after.output) == shown and (
        before.raised is not None or normalized(before.output) != shown
    )


def _new_error(before: StatementRun, after: StatementRun) -> bool:
    return (
        before.raised is None and after.raised is not None and after.in_repository and not after.import_error
    )


def compare(before: ExampleRun, after: ExampleRun) -> Comparison:
    """The example's verdict on the patch (see the module docstring)."""
    if not (before.ran and after.ran):
        return Comparison("nothing", after.note or before.note or "the example did not run")
    shown = set(before.shown_exceptions)
    pairs = [
        (b, a) for b, a in zip(before.statements, after.statements, strict=False) if b.source == a.source
    ]
    broken = [(b, a) for b, a in pairs if _new_error(b, a)]
    if broken:
        b, a = broken[0]
        return Comparison("broken", f"`{a.source}` ran clean before the patch and raises {a.raised} with it")
    reproduced = [(b, a) for b, a in pairs if _reproduced(b, shown)]
    if not reproduced:
        expected = [a for b, a in pairs if _now_as_shown(b, a)]
        if expected and not after.timed_out:
            return Comparison(
                "fixed",
                f"the task's example `{expected[0].source}` prints what the task shows "
                f"({normalized(expected[0].output)[:80]!r}) with the patch, not before it",
            )
        return Comparison("nothing", "the example did not show the problem on the starting tree")
    for b, a in reproduced:
        same_error = (
            b.raised is not None and a.raised is not None and normalized(a.raised) == normalized(b.raised)
        )
        same_output = b.raised is None and a.raised is None and normalized(a.output) == normalized(b.output)
        if same_error or same_output:
            what = f"raises {a.raised}" if a.raised else f"prints {normalized(a.output)[:80]!r}"
            return Comparison("still_failing", f"`{a.source}` still {what} with the patch, as before it")
    if after.timed_out and not before.timed_out:
        return Comparison("nothing", "the example ran out of time with the patch")
    unfixed = [a for _, a in reproduced if a.raised is not None]
    if unfixed:
        return Comparison(
            "nothing",
            f"`{unfixed[0].source}` raised {unfixed[0].raised} with the patch instead of the issue's error",
        )
    b, a = reproduced[0]
    before_did = f"raised {b.raised}" if b.raised else f"printed {normalized(b.output)[:80]!r}"
    return Comparison(
        "fixed", f"the task's example `{a.source}` {before_did} before the patch and runs clean with it"
    )


def behaviour_of(run: ExampleRun) -> str | None:
    """What the example did on one tree, as one comparable line (None when it did not run)."""
    if not run.ran:
        return None
    parts = [
        f"raised {normalized(s.raised).split(':')[0]}" if s.raised else f"ok {normalized(s.output)[:200]}"
        for s in run.statements
    ]
    text = " | ".join(parts) + (" | timed out" if run.timed_out else "")
    if len(text) <= 300:
        return text
    return text[:260] + " #" + hashlib.sha256(text.encode()).hexdigest()[:16]


class ExampleCache:
    """Starting-tree runs of the example, per tree and text, as JSON files beside the coverage cache."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _file(self, tree: str, text: str) -> Path:
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        return self.directory / f"{tree}.example-{digest}.v3.json"

    def load(self, tree: str, text: str) -> ExampleRun | None:
        try:
            return ExampleRun.model_validate_json(self._file(tree, text).read_bytes())
        except (OSError, ValidationError, ValueError):
            return None

    def store(self, tree: str, text: str, run: ExampleRun) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self._file(tree, text)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(run.model_dump_json())
            tmp.replace(path)
        except OSError:
            pass  # the cache only saves time
