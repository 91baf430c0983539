"""What a sandbox may use (`SandboxLimits`) and how gVisor is run (`GvisorOptions`): frozen values
built once by the caller (the CLI, the exec tool server) and passed down."""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Platform = Literal["ptrace", "kvm"]
FileAccess = Literal["shared", "exclusive"]


class SandboxLimits(BaseModel):
    """Limits applied to every command of a sandbox; a reused sandbox applies them per command."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    timeout_s: float = Field(default=60.0, gt=0)
    """Wall-clock limit of one command; every process of the command is killed when it passes."""
    memory_mb: int = Field(default=1024, ge=64)
    """Memory of the whole sandbox (gVisor: its memory cgroup, which kills the sandbox; process
    backend: RLIMIT_AS of each process)."""
    max_processes: int = Field(default=128, ge=8)
    """Processes and threads the command may have at once (RLIMIT_NPROC)."""
    file_size_mb: int = Field(default=256, ge=1)
    """Largest file a command may write (RLIMIT_FSIZE)."""
    cpu_time_s: float = Field(default=300.0, gt=0)
    """CPU seconds of one command. gVisor: all its processes together, measured by the in-sandbox
    supervisor (gVisor does not enforce RLIMIT_CPU). Process backend: RLIMIT_CPU per process."""
    workspace_write_mb: int = Field(default=512, ge=1)
    """How much one command may add to the workspace (gVisor backend: size of the tmpfs holding
    the sandbox's copy of the workspace above what the workspace already uses)."""
    tmp_mb: int = Field(default=256, ge=1)
    """Size of the private /tmp (gVisor backend)."""
    output_bytes: int = Field(default=1_000_000, ge=1024)
    """Cap of stdout and of stderr each: the first and last halves are kept, the middle is
    replaced by a marker saying how many bytes were dropped."""
    open_files: int = Field(default=1024, ge=64)
    """Open file descriptors per process (RLIMIT_NOFILE)."""


class GvisorOptions(BaseModel):
    """How `runsc` is invoked; the defaults suit Debian's runsc 2022 package run as root."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    runsc: str = "runsc"
    """Path or name (looked up on PATH) of the runsc binary."""
    platform: Platform = "ptrace"
    """gVisor platform; kvm hangs on some VMs, so ptrace is the default."""
    file_access_mounts: FileAccess = "shared"
    """Cache policy of the bind mounts. `shared` revalidates against the host on every access,
    which the workspace needs because host tools edit it between commands."""
    cache_runtime: bool = True
    """Let gVisor cache the read-only runtime mounts (mount hint share=container, i.e. exclusive
    file access) instead of revalidating every lookup with the host."""
    state_dir: Path = Path("/run/codeloop/runsc")
    """runsc's --root: where it keeps container state."""
    work_dir: Path = Path("/run/codeloop/sandboxes")
    """Where each sandbox's bundle and workspace mirror (a tmpfs mount) live while it runs."""
    extra_ro_paths: tuple[Path, ...] = ()
    """More host paths to show read-only at the same path (e.g. a toolchain outside /usr)."""
    runsc_flags: tuple[str, ...] = ()
    """More global runsc flags (e.g. `--debug`, `--strace` to see a command's system calls),
    passed before the subcommand to every runsc call of the sandbox."""
