"""The `process` backend: the same supervisor as under gVisor, run as a plain host process.

What it still gives: a clean environment, each command in its own session, rlimits (processes,
file size, CPU time, address space as the memory limit, open files), the wall-clock timeout,
capped output, and every descendant killed after the command (the supervisor is a child
subreaper, so daemonized processes are found and killed too).

What it does not give, and why every result says `backend: "process"`: no filesystem isolation
(the command sees and may write whatever the user running codeloop may), no network isolation,
no cap on total workspace writes (only RLIMIT_FSIZE per file), no kernel boundary, and as root
RLIMIT_NPROC is not enforced by Linux.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from anyio.abc import Process

from sandbox.bundle import WORKSPACE
from sandbox.environments.environment import Environment
from sandbox.limits import SandboxLimits
from sandbox.result import Backend
from sandbox.runtime import environment_bins, environment_variables, process_import_roots, workspace_venvs

SUPERVISOR = Path(__file__).with_name("_supervisor.py")


class ProcessLauncher:
    """Starts and stops the supervisor of one process-backend sandbox."""

    backend: Backend = "process"

    def __init__(
        self, workspace: Path, *, limits: SandboxLimits, environment: Environment | None = None
    ) -> None:
        self.workspace = workspace
        self.environment = environment
        self.limits = limits
        self.payload_uid: int | None = None  # commands run as the calling user
        self.home: Path | None = None

    async def open(self) -> None:
        # A private HOME and TMPDIR, so dotfiles and temporary files stay out of the workspace
        # and the user's home, and go away on close.
        self.home = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix="codeloop-process-")))

    async def start(self) -> Process:
        return await anyio.open_process(
            [sys.executable, "-I", "-S", str(SUPERVISOR), "group"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.workspace,
            env={},
            start_new_session=True,
        )

    async def stop(self, process: Process) -> None:
        """SIGTERM makes the supervisor kill the running command's tree before it exits."""
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.terminate()
                with anyio.move_on_after(3):
                    await process.wait()
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
            await process.aclose()

    def log_tail(self) -> str:
        return ""

    def died_of_memory(self, returncode: int | None) -> bool:
        return False

    def translate_cwd(self, cwd: str | None) -> str:
        """Accepts sandbox paths (/workspace/...) so callers need not know the backend."""
        if cwd is None or cwd in (WORKSPACE, WORKSPACE + "/"):
            return str(self.workspace)
        if cwd.startswith(WORKSPACE + "/"):
            return str(self.workspace / cwd.removeprefix(WORKSPACE + "/"))
        return str(self.workspace / cwd)

    def base_env(self) -> dict[str, str]:
        bins = [str(venv / "bin") for venv in workspace_venvs(self.workspace)]
        path = ":".join([*environment_bins(self.environment), *bins, "/usr/local/bin", "/usr/bin", "/bin"])
        home = str(self.home or self.workspace)
        env = {"PATH": path, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
        env.update(environment_variables(self.environment))
        roots = process_import_roots(self.environment, self.workspace)
        if roots:
            # No mounts here: the workspace cannot be shown at the environment's project path,
            # where its editable install points. Its import roots first on sys.path instead, so
            # the project imported is still the workspace's, never the build's copy.
            env["PYTHONPATH"] = ":".join(roots)
        return env

    def rlimits(self) -> dict[str, int]:
        return {
            "NPROC": self.limits.max_processes,
            "FSIZE": self.limits.file_size_mb * 1024 * 1024,
            "NOFILE": self.limits.open_files,
            "CPU": int(self.limits.cpu_time_s) + 1,
            "AS": self.limits.memory_mb * 1024 * 1024,
            "CORE": 0,
        }

    async def before_command(self) -> None:
        return None

    async def after_command(self) -> None:
        return None

    async def close(self) -> None:
        if self.home is not None:
            await anyio.to_thread.run_sync(shutil.rmtree, self.home, True)
