"""Errors of the sandbox package. A command that fails, times out or hits a limit is an
`ExecResult`, not an exception; these are for when the sandbox itself cannot do its job.

    SandboxError
    ├── SandboxUnavailable      the requested backend cannot run here (runsc missing or broken,
    │   └── BackendForbidden    or the policy CODELOOP_SANDBOX forbids the backend asked for)
    ├── PolicyError             the policy (CODELOOP_SANDBOX) is not one of gvisor, process, auto
    ├── WorkspaceError          the workspace is missing, not a directory, or cannot be mirrored
    ├── SandboxCrashed          the sandbox died for a reason that is not a limit of the command
    └── SandboxClosed           exec after the sandbox was closed
"""

INSTALL_RUNSC = (
    "install gVisor's runsc (Debian/Ubuntu: `apt-get install runsc`, or see "
    "https://gvisor.dev/docs/user_guide/install/), run as root, and check it with `codeloop doctor`; "
    "or allow the weaker fallback with CODELOOP_SANDBOX=process"
)


class SandboxError(Exception):
    """Base for every failure of the sandbox machinery (not of the sandboxed command)."""


class SandboxUnavailable(SandboxError):
    """The requested backend cannot run on this machine; the message says how to fix it."""


class BackendForbidden(SandboxUnavailable):
    """The deployment's policy (CODELOOP_SANDBOX) does not allow the backend that was asked for."""


class PolicyError(SandboxError):
    """The sandbox policy (CODELOOP_SANDBOX) has a value that is not gvisor, process or auto."""


class WorkspaceError(SandboxError):
    """The workspace cannot be used (missing, not a directory, or cannot be mirrored)."""


class SandboxCrashed(SandboxError):
    """The sandbox ended for a reason that is not a limit of the command (runsc failed)."""


class SandboxClosed(SandboxError):
    """A command was sent to a sandbox that is already closed."""
