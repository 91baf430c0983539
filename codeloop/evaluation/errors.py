"""Errors of the evaluation package.

EvalError
├── TaskSetError     the task set cannot be read or a task is malformed
└── PreviousRunError a --rerun-failed directory holds no readable results.jsonl
"""


class EvalError(Exception):
    """Base for every failure of `codeloop eval` that is the input's fault, not a task's."""


class TaskSetError(EvalError):
    """The task set cannot be read, or a task in it is malformed."""


class PreviousRunError(EvalError):
    """The results of an earlier run (for --rerun-failed) cannot be read."""
