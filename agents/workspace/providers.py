"""Where a role's workspace lives and how its tools are reached: here, or in the workspace service.

`LocalWorkspaces` (the default) is a scratch copy in this process's home with in-process tool
servers: no socket, no extra process. `RemoteWorkspaces` asks the workspace service
(`codeloop serve --workspaces`, `agents.workspace.messages`) for one: the copy, its tools and
whatever they run live in that service's process, and this process — which holds the model key —
gets only HTTP URLs and a bearer token (`agents.runtime.tools.HttpTarget`). Either way the patch is the
system's diff of the workspace against its snapshot (`agents.workspace.workspace_patch`).
"""

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import anyio

from agents.messages import TaskSubmitted
from agents.runtime.role import Capability, RoleDeps, StepError
from agents.runtime.tools import HttpTarget, ScopeName, ToolTarget
from agents.workspace import Patch, workspace_patch
from agents.workspace.messages import (
    OPEN_SUBJECT,
    WorkspaceClose,
    WorkspaceDiff,
    WorkspaceOpen,
    WorkspaceOpened,
    WorkspacePatch,
    WorkspaceRefused,
    WorkspaceSync,
    service_subject,
)
from agents.workspace.start import apply_patch, scratch_workspace, task_snapshot
from bus.errors import BusError
from bus.requests import request

log = logging.getLogger("codeloop.agents")


class Workspace(Protocol):
    @property
    def servers(self) -> dict[str, ToolTarget]:
        """MCP target of each server (fs, search, git, exec) rooted at the workspace."""
        ...

    async def patch(self) -> Patch:
        """The workspace's diff against its snapshot."""
        ...


class Workspaces(Protocol):
    def open(
        self,
        deps: RoleDeps,
        task_id: str,
        task: TaskSubmitted,
        label: str,
        scopes: frozenset[ScopeName],
        *,
        patch: str | None = None,
        index_dir: Path | None = None,
    ) -> AbstractAsyncContextManager[Workspace]:
        """A fresh workspace of the task's snapshot (with `patch` applied), its servers granted
        `scopes`; deleted on exit."""
        ...


@dataclass
class _LocalWorkspace:
    root: Path
    servers: dict[str, ToolTarget]

    async def patch(self) -> Patch:
        return await workspace_patch(self.root)


class LocalWorkspaces:
    """Scratch workspaces under the role's `scratch_dir`, tools from its `ToolProvider`."""

    @asynccontextmanager
    async def open(
        self,
        deps: RoleDeps,
        task_id: str,
        task: TaskSubmitted,
        label: str,
        scopes: frozenset[ScopeName],
        *,
        patch: str | None = None,
        index_dir: Path | None = None,
    ) -> AsyncIterator[Workspace]:
        async with scratch_workspace(deps, task_id, task, label) as root:
            if patch:
                await apply_patch(root, patch)
            yield _LocalWorkspace(root, deps.tools.servers(root, scopes, index_dir=index_dir))


@dataclass
class _RemoteWorkspace:
    deps: RoleDeps
    opened: WorkspaceOpened
    timeout_s: float

    @property
    def servers(self) -> dict[str, ToolTarget]:
        return {name: HttpTarget(url, self.opened.token) for name, url in self.opened.urls.items()}

    async def patch(self) -> Patch:
        return await self._patch_reply("diff", WorkspaceDiff(workspace=self.opened.workspace))

    async def sync(self, patch: str) -> Patch:
        """Make the remote tree the snapshot plus `patch`; its resulting patch."""
        return await self._patch_reply("sync", WorkspaceSync(workspace=self.opened.workspace, patch=patch))

    async def _patch_reply(self, verb: Literal["diff", "sync"], ask: WorkspaceDiff | WorkspaceSync) -> Patch:
        subject = service_subject(self.opened.service, verb)
        reply = await request(self.deps.bus, subject, ask, timeout_s=self.timeout_s)
        if isinstance(reply, WorkspaceRefused):
            raise StepError(reply.failure_class, f"the workspace service: {reply.message}")
        if not isinstance(reply, WorkspacePatch):
            raise StepError("env.infra", f"the workspace service answered a {verb} with {reply.kind}")  # pyright: ignore[reportAttributeAccessIssue] - every registered payload model declares its kind field
        return Patch(diff=reply.diff, files_changed=reply.files_changed)


class RemoteWorkspaces:
    """Workspaces held and served by the workspace service; see the module docstring.

    `timeout_s` bounds each request (an open materializes the snapshot first);
    `idle_timeout_s` is how long the service keeps a workspace nobody uses (a worker that died
    never closes it)."""

    remote = True
    """Tells the verifier to run code only there (`agents.roles.verifier.role`)."""

    def __init__(self, *, timeout_s: float = 120.0, idle_timeout_s: float = 3600.0) -> None:
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s

    @asynccontextmanager
    async def open(
        self,
        deps: RoleDeps,
        task_id: str,
        task: TaskSubmitted,
        label: str,
        scopes: frozenset[ScopeName],
        *,
        patch: str | None = None,
        index_dir: Path | None = None,
    ) -> AsyncIterator[Workspace]:
        del index_dir  # the service keeps its own indexes
        ask = WorkspaceOpen(
            task_id=task_id,
            label=label,
            snapshot=await task_snapshot(deps, task),
            scopes=sorted(scopes),
            patch=patch or None,
            idle_timeout_s=self.idle_timeout_s,
        )
        # No responder or no answer: a plain error, so the runtime retries the step (the last
        # delivery's failure is env.infra), as for a bus that is briefly down.
        reply = await request(deps.bus, OPEN_SUBJECT, ask, timeout_s=self.timeout_s)
        if isinstance(reply, WorkspaceRefused):
            raise StepError(reply.failure_class, f"the workspace service: {reply.message}")
        if not isinstance(reply, WorkspaceOpened):
            raise StepError("env.infra", f"the workspace service answered an open with {reply.kind}")  # pyright: ignore[reportAttributeAccessIssue] - every registered payload model declares its kind field
        try:
            yield _RemoteWorkspace(deps, reply, self.timeout_s)
        finally:
            with anyio.CancelScope(shield=True):
                await self._close(deps, reply)

    async def _close(self, deps: RoleDeps, opened: WorkspaceOpened) -> None:
        try:
            with anyio.fail_after(self.timeout_s):
                await request(
                    deps.bus,
                    service_subject(opened.service, "close"),
                    WorkspaceClose(workspace=opened.workspace),
                    timeout_s=self.timeout_s,
                )
        except (BusError, TimeoutError) as exc:
            # Its idle timeout deletes it; the step's result does not depend on the close.
            log.warning("could not close workspace %s: %s", opened.workspace, exc)


LOCAL = LocalWorkspaces()
"""Workspaces here, in process: what a role uses when the composition root supplies none."""
WORKSPACES: Capability[Workspaces] = Capability("workspaces")
"""Where the coder's and the verifier's workspaces are made and served, when not here (the
workspace service's `RemoteWorkspaces`)."""
