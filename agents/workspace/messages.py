"""The workspace service's requests and replies (`codeloop serve --workspaces`), on core NATS.

A role that holds a model key never runs untrusted code itself when it uses the service: it asks
for a workspace (`WorkspaceOpen` on `codeloop.workspaces.open`, shared by every service instance),
gets the URLs of that workspace's fs, git, search and exec MCP servers and a bearer token granting
exactly the scopes it asked for (`WorkspaceOpened`), takes the patch with `WorkspaceDiff` and ends it
with `WorkspaceClose`, both sent to the instance that holds the workspace
(`codeloop.workspaces.<service>.diff|close`). Replies travel on the requester's inbox only, never in
a stream, so the token is seen by the requester and the service alone.
"""

from typing import Literal

from agents.workspace.snapshot import SnapshotRef
from bus.messages import Message, register_payloads

OPEN_SUBJECT = "codeloop.workspaces.open"
SERVICE_QUEUE = "codeloop-workspaces"
"""Queue group of `OPEN_SUBJECT`: each open goes to one service instance."""


def service_subject(service: str, verb: Literal["diff", "sync", "close"]) -> str:
    """Where the instance `service` takes requests about the workspaces it holds."""
    return f"codeloop.workspaces.{service}.{verb}"


class WorkspaceOpen(Message):
    """Make a scratch workspace of `snapshot` and serve its tools."""

    kind: Literal["workspace_open"] = "workspace_open"
    """Always `workspace_open`."""
    task_id: str
    label: str
    """What the workspace is for (`code`, `verify`), in its name and its audit principal."""
    snapshot: SnapshotRef
    scopes: list[Literal["read", "write", "execute"]]
    """What the workspace's token grants; tools outside it are neither listed nor callable."""
    patch: str | None = None
    """Applied to the fresh workspace first (a revision starts from the previous patch)."""
    idle_timeout_s: float = 3600.0
    """Closed by the service when no tool call or request used it for this long (a requester
    that died never closes it)."""


class WorkspaceOpened(Message):
    """The workspace is ready: its servers' URLs and the token for them."""

    kind: Literal["workspace_opened"] = "workspace_opened"
    """Always `workspace_opened`."""
    workspace: str
    service: str
    """The instance holding it: send `WorkspaceDiff`/`WorkspaceClose` to `service_subject(service, ...)`."""
    urls: dict[str, str]
    """Streamable-HTTP MCP URL of each server (fs, git, search, exec)."""
    token: str
    """Bearer token for those URLs only, granting the requested scopes; revoked at close."""


class WorkspaceRefused(Message):
    """The request could not be served; `failure_class` as in `agents/failures.py`."""

    kind: Literal["workspace_refused"] = "workspace_refused"
    """Always `workspace_refused`."""
    failure_class: str
    message: str


class WorkspaceDiff(Message):
    """Ask for the workspace's patch against its snapshot."""

    kind: Literal["workspace_diff"] = "workspace_diff"
    """Always `workspace_diff`."""
    workspace: str


class WorkspacePatch(Message):
    """The workspace's patch, as `agents.workspace.workspace_patch` computes it."""

    kind: Literal["workspace_patch"] = "workspace_patch"
    """Always `workspace_patch`."""
    diff: str
    files_changed: list[str]


class WorkspaceSync(Message):
    """Bring the workspace to its snapshot plus `patch` (tracked and untracked changes dropped
    first), so a caller holding its own copy runs code on the same tree (the verifier)."""

    kind: Literal["workspace_sync"] = "workspace_sync"
    """Always `workspace_sync`."""
    workspace: str
    patch: str
    """Empty: the snapshot itself. Answered with the resulting `WorkspacePatch`."""


class WorkspaceClose(Message):
    """Delete the workspace and revoke its token."""

    kind: Literal["workspace_close"] = "workspace_close"
    """Always `workspace_close`."""
    workspace: str


class WorkspaceClosed(Message):
    kind: Literal["workspace_closed"] = "workspace_closed"
    """Always `workspace_closed`."""
    workspace: str
    existed: bool
    """False when it was closed already (by an idle timeout, or a repeated close)."""


register_payloads(
    WorkspaceOpen,
    WorkspaceOpened,
    WorkspaceRefused,
    WorkspaceDiff,
    WorkspacePatch,
    WorkspaceSync,
    WorkspaceClose,
    WorkspaceClosed,
)
