"""Sandboxed execution: run commands on a workspace in gVisor (runsc), or in the weaker `process`
backend where runsc is not available.

    async with open_sandbox(workspace, limits=SandboxLimits(timeout_s=30)) as sandbox:
        result = await sandbox.exec(["python", "-m", "pytest", "-q"])

What the gVisor backend promises, per command:

- Kernel: the command runs on gVisor's user-space kernel (platform ptrace by default; kvm hangs
  on some VMs), never on the host kernel's system call surface directly.
- Filesystem: an empty read-only root; read-only views of /usr (and /bin, /lib... or their
  merged-/usr symlinks), a few /etc entries needed for linking and TLS (not passwd, shadow or
  keys of the host), the interpreter running codeloop and the interpreter the workspace's
  virtualenv links to; the workspace read-write at /workspace (and at its host path, for
  virtualenv shebangs); a private tmpfs /tmp of `tmp_mb`. Nothing else of the host is visible,
  and a symlink in the workspace resolves inside the sandbox, so it cannot expose host files.
- Workspace virtualenvs (`.venv`, `venv`, `env`, `.env` holding a pyvenv.cfg, real directories,
  not symlinks) are read-only: bound from the host at both workspace paths instead of copied into
  the mirror below (a real one is gigabytes and tens of thousands of files). A command's writes
  into them fail (EROFS) and nothing of them reaches the host; `pip install` into them works only
  on the host, and the next command sees it (the mount revalidates: no share=container hint). The
  set is fixed when the sandbox opens: a virtualenv a command creates is mirrored like any files.
- Workspace writes: the sandbox works on a mirror of the workspace on a host tmpfs capped at what
  it holds plus `workspace_write_mb` (ENOSPC beyond), synchronised both ways at each command's
  boundaries (see `sandbox.workspace`): a bind mount alone has no quota.
  A command's writes under `.git/` and `.codeloop/` are undone instead of copied back: a
  planted git hook would otherwise run on the host, and `.codeloop/` holds the audit log (its `exec/`
  outbox for tool reports excepted). The process backend cannot promise this.
- Project environments (`sandbox.environments`, `open_sandbox(environment=...)`): the
  environment's directory and its base interpreter are shown read-only, its bin first on PATH,
  VIRTUAL_ENV set, and the workspace is shown read-write at the environment's project path too
  (where its editable install points), with the install's build products read-only over that
  view; so the tested code is the workspace's and no command can change the environment.
- Network: none (loopback only, the host's loopback services are unreachable).
- Identity: commands run as an unprivileged user (uid 1000) with no capabilities; only the
  supervisor, PID 1 of the sandbox, is root there, so a command cannot signal it or write to its
  channel to the host.
- Environment: only PATH, HOME=/tmp, TMPDIR=/tmp, LANG and the variables passed to `exec`.
- Limits: memory (cgroup of the whole sandbox: exceeding it kills the sandbox, the result says
  so and the next command gets a fresh sandbox), processes (RLIMIT_NPROC), file size
  (RLIMIT_FSIZE), CPU time (measured and enforced by the in-sandbox supervisor, as this gVisor
  does not enforce RLIMIT_CPU), wall time (killed at the timeout; the host kills the whole sandbox
  if the supervisor does not answer within `HOST_GRACE_S`), output (head and tail kept, a marker
  in between, bounded memory on the host).
- Life cycle: after each command every process it started is killed, daemons included. On close,
  timeout and cancellation the container is killed (`runsc kill --all`), reaped and deleted. If
  the owning process is killed outright (SIGKILL), the container ends with it (the supervisor's
  channel closes) and the next sandbox opened removes the workspace mirror left behind
  (`sandbox.leftovers`).

Warm test runs (gVisor): `keep_warm(python, env)` has the supervisor start a root-owned pytest
interpreter of codeloop's kind (a virtualenv without system site-packages) that imports pytest and
its plugins once; `exec(PYTHON -m pytest ..., warm=True)` (or `PYTHON -c CODE ...`, a script that
runs pytest itself) then forks the run from it, as the payload user with the command's limits,
instead of starting a fresh interpreter (`docs/sandbox.md`).

Speed: the runtime mounts are read-only and unchanging, so they carry gVisor's mount hint
share=container (cached, exclusive file access); the workspace and its virtualenvs stay shared
because host tools edit them between commands (caching a workspace virtualenv would hide a
module installed between commands, for little gain). What remains is the ptrace platform's cost
per system call (benchmarks/sandbox_bench.py measures it; `docs/sandbox.md` says why the sandbox
is set up this way).

One sandbox per workspace at a time: two sandboxes mirroring the same workspace would overwrite
each other's results.

The `process` backend gives the same limits and clean-up where a plain process can (see
`sandbox.process`) but no isolation of files, network or kernel; every result names its backend.
`CODELOOP_SANDBOX=gvisor` forbids that fallback (the caller reads it and passes it as `policy`).
"""

from sandbox.backend import open_sandbox, parse_policy, resolve_backend
from sandbox.errors import (
    BackendForbidden,
    PolicyError,
    SandboxClosed,
    SandboxCrashed,
    SandboxError,
    SandboxUnavailable,
    WorkspaceError,
)
from sandbox.gvisor import RunscStatus, probe_runsc
from sandbox.limits import GvisorOptions, SandboxLimits
from sandbox.result import ExecResult
from sandbox.session import Sandbox

__all__ = [
    "BackendForbidden",
    "ExecResult",
    "GvisorOptions",
    "PolicyError",
    "RunscStatus",
    "Sandbox",
    "SandboxClosed",
    "SandboxCrashed",
    "SandboxError",
    "SandboxLimits",
    "SandboxUnavailable",
    "WorkspaceError",
    "open_sandbox",
    "parse_policy",
    "probe_runsc",
    "resolve_backend",
]
