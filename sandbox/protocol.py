"""The line protocol between the host and the in-sandbox supervisor (`sandbox/_supervisor.py`).

One JSON object per line each way: the supervisor says `{"ready": true}` once, then answers every
`CommandRequest` with one `CommandReply` (and a `WarmRequest` with a `WarmReply`). The supervisor is standard-library only and builds
plain dicts; the host validates what comes back, because the channel ends inside the sandbox.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

KilledBy = Literal["timeout", "cpu", "memory"]


class CommandRequest(BaseModel):
    """One command for the supervisor."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    argv: list[str] = Field(min_length=1)
    """Program and arguments; the program is looked up on env's PATH."""
    env: dict[str, str]
    """The command's whole environment."""
    cwd: str
    """Working directory as the supervisor sees it."""
    timeout_s: float
    """Wall-clock limit, enforced by the supervisor."""
    output_bytes: int
    """Cap of stdout and of stderr each."""
    rlimits: dict[str, int]
    """RLIMIT_<name> -> value for the command's processes (NPROC, FSIZE, CPU, NOFILE, AS, CORE)."""
    cpu_time_s: float | None
    """CPU seconds of the command's processes together; measured by the supervisor as PID 1."""
    uid: int | None
    """Run the command as this user (and group); None keeps the supervisor's."""
    warm: bool | Literal["if_ready"] = False
    """The command is `PYTHON -m pytest ...` (or `PYTHON -c CODE ...`, CODE driving pytest): run
    it in the warm interpreter of PYTHON when one was started for this environment (see
    `WarmRequest`), and keep one ready after it. True waits for an interpreter still importing;
    "if_ready" runs cold instead, when a cold start would come sooner than those imports."""


class WarmRequest(BaseModel):
    """Start a pytest interpreter now, for later `warm` test runs with this interpreter and env."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Literal["warm"] = "warm"
    python: str
    env: dict[str, str]
    uid: int | None


class WarmReply(BaseModel):
    """Whether a warm interpreter is (being) started, and why not."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    warm: bool
    note: str = ""


class CommandReply(BaseModel):
    """What the supervisor observed; the host turns it into an `ExecResult`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    killed_by: KilledBy | None
    duration_s: float = 0.0
    warm: bool = False


class Ready(BaseModel):
    """The supervisor's first line."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    ready: Literal[True]
