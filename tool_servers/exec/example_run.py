"""`run_example`: the code a task's text shows, run statement by statement in the root's sandbox.

The verifier runs the task's example on the starting tree and with the patch and compares what
each statement did (`agents.roles.verifier.example`); a coder may run it to see the problem. The
statements come from the text's sessions and code blocks (`tool_servers.example_code`), run by
`example_runner` with the interpreter the tests run with (the project environment's), in the
root itself, so the tree the sandbox shows is the one judged. The text's own claims ride along:
the exception types it shows raised and, per session expression, the output it shows, so a
caller can tell "the issue's failure, reproduced" from "some failure".
"""

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tool_servers.example_code import example_blocks, shown_exceptions, shown_outputs
from tool_servers.exec import example_runner

_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
_SOURCE = Path(example_runner.__file__).read_text(encoding="utf-8")
_MARKER = example_runner.MARKER
SETUP_ALLOWANCE_S = 30.0
"""On top of the statements' own time: the interpreter's start and the example's imports."""


class RunExampleInput(BaseModel):
    model_config = _CONFIG
    text: str = Field(min_length=1, max_length=200_000)
    """The task's or issue's text; its sessions (`>>> `) and code blocks are the example."""
    timeout_s: float = Field(default=60.0, gt=0, le=600.0)
    """The statements' time, all together; a statement still running then ends the run."""


class StatementOutcome(BaseModel):
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)
    source: str
    """The statement's first line."""
    raised: str | None = None
    """`Type: first line of the message` when it raised, else None."""
    in_repository: bool = False
    """The exception's traceback passes through the repository's code."""
    import_error: bool = False
    """It raised an ImportError (a missing dependency, or a name the code no longer has)."""
    output: str = ""
    """What it printed (an expression: its value's repr), the last 2,000 characters."""
    shown_output: str | None = None
    """The output the text shows under this expression, whitespace collapsed; None when it shows none."""
    causes: list[str] = []
    """The type names of the exceptions the raised one was raised from or while handling, nearest
    first (`raise PlotSpecError(...) from err`: `TypeError`)."""
    bound: str | None = None
    """The repository's import statement run first for a name the example uses but never binds
    (`import numpy as np`), when the statement raised `NameError` for it; None otherwise."""


class ExampleOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    ran: bool
    """Something ran: the text has example code and the interpreter started."""
    statements: list[StatementOutcome] = []
    """Each statement, in order."""
    shown_exceptions: list[str] = []
    """Exception type names the text shows raised (`ValueError`)."""
    timed_out: bool = False
    """The run ended at its time limit; `statements` holds those that finished."""
    backend: str | None = None
    """The sandbox that ran it (`gvisor` or `process`)."""
    duration_s: float = 0.0
    note: str | None = None
    """Why nothing ran, or what went wrong, for a person."""


def example_request(text: str, timeout_s: float) -> tuple[list[str], str] | None:
    """The blocks of `text` and the runner's argument; None when the text shows no example code."""
    blocks = example_blocks(text)
    if not blocks:
        return None
    return blocks, json.dumps({"blocks": blocks, "deadline_s": timeout_s})


def runner_argv(python: str, argument: str) -> list[str]:
    return [python, "-c", _SOURCE, argument]


def read_outcome(
    text: str, stdout: str, stderr: str, timed_out: bool, backend: str, duration_s: float
) -> ExampleOutcome:
    """The runner's report from its output, with the text's claims attached."""
    shown = shown_outputs(text)
    exceptions = sorted(shown_exceptions(text))
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(_MARKER)), None)
    if line is None:
        tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
        note = (
            "timed out before reporting"
            if timed_out
            else f"the example runner did not report: {tail[0][:300]}"
        )
        return ExampleOutcome(
            ran=False, shown_exceptions=exceptions, timed_out=timed_out, backend=backend, note=note
        )
    report = json.loads(line[len(_MARKER) :])
    statements = []
    for raw in report.get("statements", []):
        outcome = StatementOutcome.model_validate(raw)
        expected = shown.get(" ".join(outcome.source.split()))
        statements.append(outcome.model_copy(update={"shown_output": expected}) if expected else outcome)
    return ExampleOutcome(
        ran=bool(statements),
        statements=statements,
        shown_exceptions=exceptions,
        timed_out=bool(report.get("timed_out")) or timed_out,
        backend=backend,
        duration_s=round(duration_s, 3),
        note=None if statements else "no statement of the example ran",
    )
