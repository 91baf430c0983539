"""The OCI bundle of a gVisor sandbox: an empty read-only root, the runtime bind-mounted read-only
at its host paths, the workspace mirror read-write at /workspace, the workspace's virtualenvs
bind-mounted read-only from the host over their (empty) places in the mirror, a private tmpfs /tmp."""

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from sandbox.limits import SandboxLimits
from sandbox.runtime import python_for_supervisor, system_symlinks

WORKSPACE = "/workspace"
SUPERVISOR = "/.codeloop/supervisor.py"
# gVisor's own overhead (sentry, gofer buffers) is charged to the sandbox's memory cgroup too.
SENTRY_OVERHEAD_MB = 64
# Each sandboxed task costs ~18 host tasks on ptrace and a tight host pids cgroup crashes gVisor
# instead of failing the fork: the real process cap is RLIMIT_NPROC inside.
HOST_PIDS_LIMIT = 8192
# Commands run as this unprivileged user; only the supervisor (pid 1) is root.
PAYLOAD_UID = 1000
_PASSWD = (
    "root:x:0:0:root:/tmp:/bin/sh\n"
    f"sandbox:x:{PAYLOAD_UID}:{PAYLOAD_UID}:sandbox:/tmp:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
_GROUP = f"root:x:0:\nsandbox:x:{PAYLOAD_UID}:\nnogroup:x:65534:\n"
_HOSTS = "127.0.0.1 localhost sandbox\n::1 localhost\n"
_CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID"]


def _bind(source: Path | str, destination: str, *, writable: bool) -> dict:
    return {
        "destination": destination,
        "type": "bind",
        "source": str(source),
        "options": ["rbind", "rw" if writable else "ro", "nosuid", "nodev"],
    }


def write_bundle(
    bundle: Path,
    *,
    sandbox_id: str,
    workspace_mirror: Path,
    workspace_host_path: Path,
    ro_paths: list[Path],
    limits: SandboxLimits,
    venvs: Sequence[Path] = (),
    cache_runtime: bool = True,
    workspace_aliases: Sequence[Path] = (),
    alias_overlays: Sequence[tuple[Path, str]] = (),
) -> None:
    """Writes `bundle/config.json` and `bundle/rootfs` (mount points, /etc files, the supervisor).

    `venvs` are virtualenvs directly inside the workspace that the mirror leaves out: each is
    bound read-only from the host at the same two places as the workspace. `workspace_aliases`
    are more places the workspace mirror is shown read-write: a project environment's project
    path, inside its read-only directory, where its editable install points. `alias_overlays`
    (source, relative path) are shown read-only over each alias at that path: the environment's
    build products the workspace lacks (the mirror holds an empty mount point for each).
    """
    rootfs = bundle / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "passwd").write_text(_PASSWD)
    (rootfs / "etc" / "group").write_text(_GROUP)
    (rootfs / "etc" / "hosts").write_text(_HOSTS)
    for name, target in system_symlinks().items():
        (rootfs / name.lstrip("/")).symlink_to(target)
    supervisor = rootfs / SUPERVISOR.lstrip("/")
    supervisor.parent.mkdir(parents=True)
    shutil.copyfile(Path(__file__).with_name("_supervisor.py"), supervisor)
    shutil.copyfile(Path(__file__).with_name("_warm_pytest.py"), supervisor.with_name("warm_pytest.py"))

    mounts = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/tmp",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=1777", f"size={limits.tmp_mb}m"],
        },
        # POSIX semaphores and shared memory (Python's multiprocessing locks and pools) live in
        # /dev/shm; without it they fail with EACCES. Docker gives containers 64 MiB there.
        {
            "destination": "/dev/shm",
            "type": "tmpfs",
            "source": "shm",
            "options": ["nosuid", "nodev", "noexec", "mode=1777", "size=64m"],
        },
    ]
    for path in ro_paths:
        mounts.append(_bind(path, str(path), writable=False))
    mounts.append(_bind(workspace_mirror, WORKSPACE, writable=True))
    # Also at its host path: a virtualenv inside the workspace has absolute shebangs and .pth
    # entries naming that path.
    workspace_paths = [WORKSPACE]
    if str(workspace_host_path) != WORKSPACE:
        mounts.append(_bind(workspace_mirror, str(workspace_host_path), writable=True))
        workspace_paths.append(str(workspace_host_path))
    # After the workspace mounts, over the empty directories the mirror holds in their place. No
    # share=container hint: the host may `pip install` into them between commands, and a cached
    # (exclusive) mount would then serve stale directory listings and file sizes.
    for venv in venvs:
        for place in workspace_paths:
            mounts.append(_bind(venv, f"{place}/{venv.name}", writable=False))
    # After the read-only runtime mounts that hold them (the environment's directory).
    for alias in workspace_aliases:
        mounts.append(_bind(workspace_mirror, str(alias), writable=True))
        for source, rel in alias_overlays:
            mounts.append(_bind(source, f"{alias}/{rel}", writable=False))
    for mount in mounts:
        target = rootfs / mount["destination"].lstrip("/")
        if mount["type"] == "bind" and Path(mount["source"]).is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch(exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)

    annotations = {}
    if cache_runtime:
        # gVisor mount hints: share=container tells runsc nobody outside the sandbox changes
        # these read-only mounts, so it caches them (exclusive file access) while the workspace
        # keeps revalidating (shared) because host tools edit it between commands.
        for index, path in enumerate(ro_paths):
            name = f"runtime{index}"
            annotations[f"dev.gvisor.spec.mount.{name}.source"] = str(path)
            annotations[f"dev.gvisor.spec.mount.{name}.type"] = "bind"
            annotations[f"dev.gvisor.spec.mount.{name}.share"] = "container"
    config = {
        "ociVersion": "1.0.2",
        "annotations": annotations,
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": [str(python_for_supervisor()), "-I", "-S", SUPERVISOR, "init"],
            "env": ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"],
            "cwd": WORKSPACE,
            "capabilities": {key: _CAPS for key in ("bounding", "effective", "permitted")},
            "noNewPrivileges": True,
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "sandbox",
        "mounts": mounts,
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
            "cgroupsPath": f"/codeloop/{sandbox_id}",
            "resources": {
                "memory": {"limit": (limits.memory_mb + SENTRY_OVERHEAD_MB) * 1024 * 1024},
                "pids": {"limit": HOST_PIDS_LIMIT},
            },
        },
    }
    (bundle / "config.json").write_text(json.dumps(config, indent=2))
