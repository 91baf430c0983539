"""Errors of the verifier, a branch of `agents.errors.AgentError`.

    VerifierError          failure_class
    ├── WorkspaceError     env.infra     the workspace is not a git repository at its starting tree,
    │                                    or git failed
    ├── ExecUnavailable    env.infra     the exec server could not run a call (exec_session.py)
    └── MalformedPatch     patch.malformed  the text is not a unified diff (patchset.py; a ValueError)

Everything the verifier finds wrong with a patch is data (a `Failure` in the report), not an
error; these are for a caller that handed it a workspace it cannot work in, and for the
verifier's own plumbing (it reports `ExecUnavailable` and `MalformedPatch` as failures itself).
"""

from typing import ClassVar

from agents.errors import AgentError


class VerifierError(AgentError):
    """Base of the verifier's errors."""

    failure_class: ClassVar[str] = "env.infra"


class WorkspaceError(VerifierError):
    """The workspace cannot be used: not a git repository, not at its starting tree, git failed."""
