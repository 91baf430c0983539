"""Why a listed test does not pass with the gold patch here: a gold validation names, per test,
whether its failure shows that it needed the network (which the sandbox never gives), so the
reports can say which tests this environment cannot run and why, instead of only that they fail.

This does not grade: the official parsers and grading decide pass or fail. It reads the failure
sections pytest prints (`____ Class.test_name ____` up to the next header) and looks for the
errors a connection attempt without a network raises.
"""

import re

from agents.roles.verifier.environment_failures import NETWORK_SIGNS
from codeloop.swebench.instances import Instance

NETWORK = "network"
OTHER = "fails with the gold patch here"
ABSENT = "no result in the log"
"""Neither a failure section nor a per-test result line names it: not run, or run by a command
whose output lists no per-test results (pytest without `-rA`)."""
# pytest pads a section's title with underscores to the terminal's width: a long title gets as
# few as one each side. The separator lines inside a traceback (`_ _ _ _`) are not titles.
_HEADER = re.compile(r"^_+ (?:ERROR at (?:setup|teardown) of )?([^_\s].*?) _+$", re.MULTILINE)


def sections(log: str) -> dict[str, str]:
    """pytest's failure and error sections of `log`, by their title (`Class.test[param]`)."""
    found: dict[str, str] = {}
    headers = list(_HEADER.finditer(log))
    ends = [h.start() for h in headers[1:]] + [len(log)] if headers else []
    for current, end in zip(headers, ends, strict=True):
        found[current.group(1)] = found.get(current.group(1), "") + log[current.end() : end]
    return found


def _title(test_id: str) -> str:
    """The section title pytest gives a test id: `file.py::Class::test[x]` → `Class.test[x]`."""
    parts = test_id.split("::")
    return ".".join(parts[1:]) if len(parts) > 1 else parts[0]


def reasons(instance: Instance, not_passing: list[str], log: str) -> dict[str, str]:
    """For each listed test that did not pass, `network` when its failure shows a connection
    attempt the sandbox refused, `no result in the log` when the log does not name it at all,
    else `fails with the gold patch here`."""
    found = sections(log)
    why = {}
    for test in not_passing:
        text = found.get(_title(test))
        if text is None and test not in log:
            why[test] = ABSENT
        else:
            why[test] = NETWORK if any(sign in (text or "") for sign in NETWORK_SIGNS) else OTHER
    return why
