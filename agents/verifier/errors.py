"""Errors of the verifier.

    VerifierError
    └── WorkspaceError   the workspace is not a git repository at its starting tree, or git failed

Everything the verifier finds wrong with a patch is data (a `Failure` in the report), not an
error; these are for a caller that handed it a workspace it cannot work in.
"""


class VerifierError(Exception):
    """Base of the verifier's errors."""


class WorkspaceError(VerifierError):
    """The workspace cannot be used: not a git repository, not at its starting tree, git failed."""
