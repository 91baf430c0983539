"""`ExecResult`: what one sandboxed command produced. Its JSON is the output contract of
`codeloop sandbox exec --json`, which other tools parse: keep the fields exactly as they are."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sandbox.environments.environment import EnvironmentInfo

Backend = Literal["gvisor", "process"]


class ExecResult(BaseModel):
    """The outcome of one command. A failing, timed-out or killed command is a result, not an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    exit_code: int | None
    """The command's exit status; 128+N when a signal N it did not expect ended it; None when the
    sandbox killed it (timeout, CPU or memory limit), with the reason at the end of stderr."""
    stdout: str
    """Standard output, decoded as UTF-8 (invalid bytes replaced), capped (see `truncated`)."""
    stderr: str
    """Standard error, like stdout; limit messages of the sandbox are appended here."""
    timed_out: bool
    """True when the wall-clock timeout killed the command."""
    backend: Backend
    """Which isolation ran it. `process` is the weaker fallback: no filesystem, network or
    kernel isolation, only rlimits, a process group and a clean environment."""
    duration_s: float
    """Wall-clock seconds from handing the command to the sandbox to its end (exit or kill), as
    seen by the caller; starting the sandbox and syncing the workspace are not included."""
    truncated: bool
    """True when stdout or stderr was cut to the output cap."""
    warm: bool = Field(default=False, exclude=True)
    """True when a test run started in a pytest interpreter the sandbox had kept ready
    (`Sandbox.keep_warm`) instead of a fresh one. For callers in this process only: not part of
    the JSON (`codeloop sandbox exec --json`, the exec server's results)."""
    warning: str | None = None
    """Set whenever the weaker `process` backend ran the command: why (gVisor unusable and
    `auto` fell back, or `process` was chosen) and what that means. None under gVisor."""
    environment: EnvironmentInfo | None = None
    """The project environment the command ran in (its key, what its recipe came from, the
    Python, whether this use built it and how long that took); None: no project environment."""
