"""Errors of `codeloop swebench` (part of `codeloop.errors`' tree).

SwebenchError (CodeloopError)        the run's input or set-up is at fault, not an instance
├── InstanceFileError                the instances file cannot be read or a line is malformed
├── UnknownInstance                  --instance-ids names an id the instances file lacks
├── PredictionsError                 the predictions file cannot be read or is malformed
├── RepositoryNotFound               no clone, mirror or bundle of a repository (says where it looked)
├── SpecError                        no SWE-bench spec for a (repository, version), or a bad --specs file
├── InterpreterMissing               the Python version a spec names is not on this machine
└── EnvironmentBuildError            an environment's build failed (the instance is `env.setup`)

The CLI turns the first six into `error: ...` and exit 2 before anything runs. An environment
that fails to build is no usage error: it makes its instances error instances, and the run goes on.
"""

from codeloop.errors import CodeloopError


class SwebenchError(CodeloopError):
    """Base of every failure of `codeloop swebench` that is not one instance's outcome."""


class InstanceFileError(SwebenchError):
    """The instances file cannot be read, or one of its instances is malformed (the message names it)."""


class UnknownInstance(SwebenchError):
    """An instance id asked for is not in the instances file."""


class PredictionsError(SwebenchError):
    """The predictions file cannot be read or one prediction is malformed."""


class RepositoryNotFound(SwebenchError):
    """No source of a repository was found; the message says where codeloop looked."""


class SpecError(SwebenchError):
    """No environment spec for a (repository, version), or a `--specs` file that cannot be used."""


class InterpreterMissing(SwebenchError):
    """The Python version an environment needs is not installed here; the message says how to get it."""


class EnvironmentBuildError(SwebenchError):
    """Building an environment failed: which step, and the tail of its log."""

    def __init__(self, message: str, *, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail
