"""Errors of the sandbox package. A command that fails, times out or hits a limit is an
`ExecResult`, not an exception; these are for when the sandbox itself cannot do its job.

    SandboxError
    ├── SandboxUnavailable      the requested backend cannot run here (runsc missing or broken,
    │   └── BackendForbidden    or the policy CODELOOP_SANDBOX forbids the backend asked for)
    ├── PolicyError             the policy (CODELOOP_SANDBOX) is not one of gvisor, process, auto
    ├── WorkspaceError          the workspace is missing, not a directory, or cannot be mirrored
    ├── SandboxCrashed          the sandbox died for a reason that is not a limit of the command
    ├── SandboxClosed           exec after the sandbox was closed
    └── EnvironmentSetupError   a project environment could not be made ready (failure class env.setup)
        ├── RecipeInvalid       the recipe or the settings cannot be used (bad Python request,
        │                       unreadable dependency file, a kind of project this cannot build)
        ├── PythonNotFound      no interpreter on this machine satisfies the recipe's Python
        └── BuildFailed         an install step failed: which step, the log's tail, and the
                                package the index does not have when that was the cause
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


class EnvironmentSetupError(SandboxError):
    """A project environment could not be made ready. Not the tested code's fault: the failure
    class of what it stops is `env.setup`, and the message says what to fix."""

    failure_class = "env.setup"


class RecipeInvalid(EnvironmentSetupError):
    """The recipe or the settings cannot be used; the message names the file or value."""


class PythonNotFound(EnvironmentSetupError):
    """No interpreter satisfies the recipe's Python; the message names the version, where it
    looked, and how to install it (`pyenv install 3.9`, `uv python install 3.9`)."""

    def __init__(self, message: str, *, requested: str) -> None:
        super().__init__(message)
        self.requested = requested
        """The Python the recipe asked for (a version, a specifier or a path)."""


class BuildFailed(EnvironmentSetupError):
    """A step of an environment's build failed (or ran past the build's time limit)."""

    def __init__(
        self,
        message: str,
        *,
        step: str,
        log_tail: str,
        missing: str | None = None,
        log_path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.step = step
        """The step that failed: an install command as written in the recipe, or a step of the
        machinery (`create the virtualenv`, `install codeloop's test tools`, ...)."""
        self.log_tail = log_tail
        """The last lines of the step's output."""
        self.missing = missing
        """The requirement the package index does not have, when that is why pip or uv failed."""
        self.log_path = log_path
        """The whole build log on the host (kept until the next build of the same key)."""
