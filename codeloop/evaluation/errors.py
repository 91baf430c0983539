"""Errors of the evaluation package (part of `codeloop.errors`' tree).

EvalError (CodeloopError)
├── TaskSetError     the task set cannot be read or a task is malformed
└── PreviousRunError a --rerun-failed directory holds no readable results.jsonl
"""

from codeloop.errors import CodeloopError


class EvalError(CodeloopError):
    """Base for every failure of `codeloop eval` that is the input's fault, not a task's."""


class TaskSetError(EvalError):
    """The task set cannot be read, or a task in it is malformed."""


class PreviousRunError(EvalError):
    """The results of an earlier run (for --rerun-failed) cannot be read."""
