"""Choosing a backend and opening a sandbox: `open_sandbox` is the package's entry point.

Policy: `gvisor|process|auto` (default auto), the deployment's `CODELOOP_SANDBOX`, which the
composition root reads (`codeloop.config`) and passes in: this package never reads the
environment. `auto` means gVisor when runsc works here and the process backend otherwise;
`gvisor` forbids the fallback (a deployment that must never run code unisolated sets it);
`process` forces the weaker backend. The policy is parsed where a backend is chosen, so a bad
value is a `PolicyError` there.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

import anyio

from sandbox.environments.environment import Environment
from sandbox.errors import INSTALL_RUNSC, BackendForbidden, PolicyError, SandboxUnavailable, WorkspaceError
from sandbox.gvisor import GvisorLauncher, probe_runsc
from sandbox.limits import GvisorOptions, SandboxLimits
from sandbox.process import ProcessLauncher
from sandbox.result import Backend
from sandbox.session import Launcher, Sandbox

BackendChoice = Literal["gvisor", "process", "auto"]
POLICY_VARIABLE = "CODELOOP_SANDBOX"
_NO_ISOLATION = "the command runs with no filesystem, network or kernel isolation, only rlimits"


def parse_policy(value: str) -> BackendChoice:
    """The policy a `CODELOOP_SANDBOX` value names: case and spaces ignored, empty means auto.

    Raises:
        PolicyError: the value is not one of gvisor, process, auto.
    """
    policy = value.strip().lower() or "auto"
    if policy not in ("gvisor", "process", "auto"):
        raise PolicyError(f"{POLICY_VARIABLE}={policy!r} is not one of gvisor, process, auto")
    return policy


def resolve_backend(
    requested: BackendChoice = "auto",
    *,
    policy: str = "auto",
    gvisor: GvisorOptions | None = None,
) -> Backend:
    """Which backend a request gets under the policy (`parse_policy` reads it).

    Raises:
        PolicyError: the policy is not one of gvisor, process, auto.
        BackendForbidden: the policy pins one backend and the request asks for the other.
        SandboxUnavailable: gVisor is required (asked for or pinned) and runsc does not work.
    """
    return choose_backend(requested, policy=policy, gvisor=gvisor)[0]


def choose_backend(
    requested: BackendChoice = "auto",
    *,
    policy: str = "auto",
    gvisor: GvisorOptions | None = None,
) -> tuple[Backend, str | None]:
    """`resolve_backend`'s answer and, for the process backend, the warning every result carries:
    the weaker backend never runs silently.

    Raises:
        PolicyError, BackendForbidden, SandboxUnavailable: see `resolve_backend`.
    """
    policy = parse_policy(policy)
    if requested != "auto" and policy != "auto" and requested != policy:
        raise BackendForbidden(
            f"backend {requested!r} requested but {POLICY_VARIABLE}={policy} allows only {policy!r}"
        )
    choice = requested if requested != "auto" else policy
    if choice == "process":
        why = "--backend process" if requested == "process" else f"{POLICY_VARIABLE}=process"
        return "process", f"weaker sandbox: the process backend was chosen ({why}); {_NO_ISOLATION}"
    options = gvisor or GvisorOptions()
    status = probe_runsc(options.runsc, options.platform)
    if status.works:
        return "gvisor", None
    if choice == "gvisor":
        raise SandboxUnavailable(f"gVisor sandbox unavailable: {status.detail}. Fix: {INSTALL_RUNSC}")
    return "process", (
        f"weaker sandbox: gVisor is unusable here ({status.detail}), so {POLICY_VARIABLE}=auto fell back "
        f"to the process backend; {_NO_ISOLATION}. Fix: install gVisor's runsc (`apt-get install runsc`, "
        f"as root; `codeloop doctor` checks it); {POLICY_VARIABLE}=gvisor refuses to run without it"
    )


@asynccontextmanager
async def open_sandbox(
    workspace: Path,
    *,
    limits: SandboxLimits,
    backend: BackendChoice = "auto",
    gvisor: GvisorOptions | None = None,
    ro_paths: tuple[Path, ...] = (),
    policy: str = "auto",
    environment: Environment | None = None,
) -> AsyncIterator[Sandbox]:
    """Opens a reusable sandbox on `workspace`, shown read-write at /workspace.

    `ro_paths` are extra host paths shown read-only at the same path (e.g. a virtualenv outside
    the workspace). `policy` is the deployment's (`CODELOOP_SANDBOX`, as the caller read it).
    `environment` (see `sandbox.environments`): its directory and base interpreter are shown
    read-only, its bin is first on PATH, VIRTUAL_ENV names it, and the workspace is also shown at
    its project path (gVisor; the process backend puts the workspace's import roots first on
    PYTHONPATH instead), so the project imported is the workspace's.
    The sandbox starts at the first command; on exit, cancellation included, it is killed and
    deleted.

    Raises:
        WorkspaceError: the workspace is not an existing directory.
        PolicyError, BackendForbidden, SandboxUnavailable: see `resolve_backend`.
    """
    workspace = Path(await anyio.Path(workspace).resolve())
    if not await anyio.Path(workspace).is_dir():
        raise WorkspaceError(f"workspace {workspace} is not an existing directory")
    chosen, warning = await anyio.to_thread.run_sync(
        lambda: choose_backend(backend, policy=policy, gvisor=gvisor)
    )
    launcher: Launcher
    if chosen == "gvisor":
        launcher = GvisorLauncher(
            workspace,
            limits=limits,
            options=gvisor or GvisorOptions(),
            ro_paths=ro_paths,
            environment=environment,
        )
    else:
        launcher = ProcessLauncher(workspace, limits=limits, environment=environment)
    try:
        await launcher.open()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await launcher.close()
        raise
    sandbox = Sandbox(launcher, limits)
    sandbox.warning = warning
    try:
        yield sandbox
    finally:
        await sandbox.aclose()
