"""Running the in-sandbox supervisor under runsc: the probe `codeloop doctor` reports, the OCI
bundle's life cycle, and the teardown that leaves no runsc or payload process behind."""

import os
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import anyio
from anyio.abc import Process

from sandbox.bundle import PAYLOAD_UID, WORKSPACE, write_bundle
from sandbox.environments.environment import Environment
from sandbox.errors import INSTALL_RUNSC, SandboxUnavailable
from sandbox.leftovers import claim, sweep
from sandbox.limits import GvisorOptions, Platform, SandboxLimits
from sandbox.result import Backend
from sandbox.runtime import (
    environment_bins,
    environment_paths,
    environment_variables,
    mounted_venvs,
    product_mounts,
    project_aliases,
    runtime_paths,
    workspace_venvs,
)
from sandbox.workspace import WorkspaceMirror

PROBE_TIMEOUT_S = 20.0
# runsc exits with the init's status; 128+SIGKILL when the memory cgroup killed the sandbox.
OOM_EXIT = 137


@dataclass(frozen=True)
class RunscStatus:
    """Whether runsc can start a sandbox here, and if not, why and how to fix it."""

    works: bool
    platform: Platform
    version: str
    detail: str


@cache
def probe_runsc(runsc: str = "runsc", platform: Platform = "ptrace") -> RunscStatus:
    """Starts a throw-away sandbox running /bin/true (a sandbox's cold start; cached per process)."""
    binary = shutil.which(runsc)
    if binary is None:
        return RunscStatus(False, platform, "", "runsc not found on PATH")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    if os.geteuid() != 0:
        return RunscStatus(False, platform, version, f"runsc needs root here (running as uid {os.geteuid()})")
    state = Path(f"/run/codeloop/probe-{uuid.uuid4().hex[:8]}")
    cmd = [binary, "--root", str(state), "--network=none", f"--platform={platform}", "do", "/bin/true"]
    # Its own session, so a hanging probe (kvm) is killed with the sandbox processes it started.
    with subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as probe:
        try:
            output, _ = probe.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(probe.pid, signal.SIGKILL)
            probe.wait()
            _delete_all(binary, state)
            hint = "; the kvm platform hangs on some VMs: use ptrace" if platform == "kvm" else ""
            return RunscStatus(
                False,
                platform,
                version,
                f"`runsc --platform={platform} do /bin/true` hung for {PROBE_TIMEOUT_S:.0f} s{hint}",
            )
        finally:
            shutil.rmtree(state, ignore_errors=True)
    if probe.returncode != 0:
        tail = output.strip().splitlines()[-3:]
        return RunscStatus(
            False, platform, version, f"runsc failed (exit {probe.returncode}): {' | '.join(tail)}"
        )
    return RunscStatus(True, platform, version, "ok")


def _delete_all(binary: str, state: Path) -> None:
    listed = subprocess.run([binary, "--root", str(state), "list", "-quiet"], capture_output=True, text=True)
    for container in listed.stdout.split():
        subprocess.run(
            [binary, "--root", str(state), "kill", "--all", container, "KILL"], capture_output=True
        )
        subprocess.run([binary, "--root", str(state), "delete", "--force", container], capture_output=True)


def _rmdir_cgroups(container_id: str) -> int:
    """Removes what is empty of the container's cgroups; returns how many are still busy."""
    busy = 0
    for path in Path("/sys/fs/cgroup").glob(f"*/codeloop/{container_id}"):
        try:
            path.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            busy += 1
    return busy


async def _remove_cgroups(container_id: str) -> None:
    """Removes the container's cgroups if runsc left them, as it does when `runsc run` was killed
    before it had recorded the container. The killed sandbox processes are not our children, so
    their cgroups stay busy until the kernel has finished them: retry for up to two seconds."""
    for _ in range(40):
        if await anyio.to_thread.run_sync(_rmdir_cgroups, container_id) == 0:
            return
        await anyio.sleep(0.05)


def _ended_with_parent(cmd: list[str]) -> list[str]:
    """`cmd` under a parent-death SIGKILL (util-linux `setpriv`, which execs it under the same pid).

    If the owner is SIGKILLed, the supervisor sees its channel close and ends the container; this
    is the second guard, for a supervisor that cannot act (stopped, or never started): attached
    `runsc run` takes its sandbox and gofer down with it. The signal is tied to the thread that
    starts runsc, the event loop's, which lives as long as the sandbox's owner."""
    setpriv = shutil.which("setpriv")
    return cmd if setpriv is None else [setpriv, "--pdeathsig=KILL", "--", *cmd]


class GvisorLauncher:
    """Starts and stops the supervisor of one sandbox under runsc; holds its bundle and mirror."""

    backend: Backend = "gvisor"

    def __init__(
        self,
        workspace: Path,
        *,
        limits: SandboxLimits,
        options: GvisorOptions,
        ro_paths: tuple[Path, ...] = (),
        environment: Environment | None = None,
    ) -> None:
        self.workspace = workspace
        self.environment = environment
        self.limits = limits
        self.options = options
        self.runsc = shutil.which(options.runsc) or options.runsc
        self.base = options.work_dir / uuid.uuid4().hex[:12]
        # Fixed for the sandbox's life: a virtualenv made or removed later is mirrored as files
        # (made) or keeps its mount (removed) until the next sandbox.
        self.venvs = mounted_venvs(workspace)
        self.products = product_mounts(environment, workspace)
        self.mirror = WorkspaceMirror(
            workspace,
            self.base / "workspace",
            write_cap_mb=limits.workspace_write_mb,
            owner=PAYLOAD_UID,
            unmirrored=frozenset(venv.name for venv in self.venvs),
            placeholders=self.products,
        )
        self.payload_uid: int | None = PAYLOAD_UID
        self.extra_ro_paths = (*options.extra_ro_paths, *ro_paths, *environment_paths(environment))
        self.ro_paths: list[Path] = []
        self.container_id = ""
        self.generation = 0

    def _runsc(self, *args: str) -> list[str]:
        return [
            self.runsc,
            "--root",
            str(self.options.state_dir),
            "--network=none",
            f"--platform={self.options.platform}",
            f"--file-access-mounts={self.options.file_access_mounts}",
            *self.options.runsc_flags,
            *args,
        ]

    async def open(self) -> None:
        status = await anyio.to_thread.run_sync(probe_runsc, self.options.runsc, self.options.platform)
        if not status.works:
            raise SandboxUnavailable(f"gVisor sandbox unavailable: {status.detail}. Fix: {INSTALL_RUNSC}")
        ro_paths = await anyio.to_thread.run_sync(runtime_paths, self.workspace, self.extra_ro_paths)
        # A path inside the workspace would be hidden by the workspace mount anyway; a virtualenv
        # there is bound by itself (after the workspace), and must not get the runtime's cache hint.
        self.ro_paths = [p for p in ro_paths if not p.is_relative_to(self.workspace)]
        await anyio.to_thread.run_sync(sweep, self.options.work_dir)
        await anyio.to_thread.run_sync(claim, self.base)
        await anyio.to_thread.run_sync(self.mirror.open)

    async def start(self) -> Process:
        """Writes a fresh bundle and starts `runsc run` attached, its stdio being the channel."""
        self.generation += 1
        self.container_id = f"codeloop-{self.base.name}-{self.generation}"
        bundle = self.base / f"bundle-{self.generation}"
        await anyio.to_thread.run_sync(self._write_bundle, bundle)
        # runsc's own messages and the supervisor's stderr: read back when the sandbox fails.
        log = await anyio.to_thread.run_sync(open, bundle / "runsc.log", "wb")
        try:
            return await anyio.open_process(
                _ended_with_parent(self._runsc("run", "--bundle", str(bundle), self.container_id)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        finally:
            log.close()

    def _write_bundle(self, bundle: Path) -> None:
        bundle.mkdir(parents=True)
        write_bundle(
            bundle,
            sandbox_id=self.container_id,
            workspace_mirror=self.mirror.path,
            workspace_host_path=self.workspace,
            ro_paths=self.ro_paths,
            limits=self.limits,
            venvs=self.venvs,
            cache_runtime=self.options.cache_runtime,
            workspace_aliases=project_aliases(self.environment, self.workspace),
            alias_overlays=[
                (self.environment.project_path / rel, rel)
                for rel in self.products
                if self.environment is not None and self.environment.project_path is not None
            ],
        )

    def log_tail(self) -> str:
        log = self.base / f"bundle-{self.generation}" / "runsc.log"
        try:
            return " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
        except OSError:
            return ""

    async def stop(self, process: Process) -> None:
        """Kill every process of the container, reap runsc, then delete the container (that
        order: a bare `runsc delete --force` is slow and can leave cgroups behind)."""
        with anyio.CancelScope(shield=True):
            killed = await anyio.run_process(
                self._runsc("kill", "--all", self.container_id, "KILL"), check=False, stdin=subprocess.DEVNULL
            )
            # A refused kill means the container is not running yet (cancelled during `runsc run`):
            # then runsc itself and the sandbox processes it started go, as one process group.
            with anyio.move_on_after(5 if killed.returncode == 0 else 0):
                await process.wait()
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
            await process.aclose()
            await anyio.run_process(
                self._runsc("delete", "--force", self.container_id), check=False, stdin=subprocess.DEVNULL
            )
            await _remove_cgroups(self.container_id)
            await anyio.to_thread.run_sync(shutil.rmtree, self.base / f"bundle-{self.generation}", True)

    def died_of_memory(self, returncode: int | None) -> bool:
        return returncode in (OOM_EXIT, -9)

    def translate_cwd(self, cwd: str | None) -> str:
        if cwd is None:
            return WORKSPACE
        return cwd if cwd.startswith("/") else f"{WORKSPACE}/{cwd}"

    def base_env(self) -> dict[str, str]:
        bins = [f"{WORKSPACE}/{venv.name}/bin" for venv in workspace_venvs(self.workspace)]
        path = ":".join([*environment_bins(self.environment), *bins, "/usr/local/bin", "/usr/bin", "/bin"])
        env = {"PATH": path, "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
        return {**env, **environment_variables(self.environment)}

    def rlimits(self) -> dict[str, int]:
        return {
            "NPROC": self.limits.max_processes,
            "FSIZE": self.limits.file_size_mb * 1024 * 1024,
            "NOFILE": self.limits.open_files,
            "CORE": 0,
        }

    async def before_command(self) -> None:
        await anyio.to_thread.run_sync(self.mirror.before_command)

    async def after_command(self) -> None:
        await anyio.to_thread.run_sync(self.mirror.after_command)

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.mirror.close)
            await anyio.to_thread.run_sync(shutil.rmtree, self.base, True)
