"""The workspace service (`codeloop serve --workspaces`): scratch workspaces and their tools, served
over HTTP MCP to roles that hold model keys and run none of the workspace's code themselves.

A request/reply service on core NATS (`bus.requests`, messages in `agents.workspace.messages`), not
a JetStream actor: an open is answered within seconds or retried by the asking step, and a
workspace lives in this process's memory and directory, so durable redelivery to another instance
would buy nothing. Opens go to the queue group (any instance); diff and close go to the instance
that holds the workspace, named in the open's reply.

One HTTP listener serves every workspace: `/w/<workspace>/<server>/mcp`. Each workspace's servers
check their own bearer token (fresh, 256 bits, granting exactly the requested scopes): a missing,
wrong or other workspace's token gets 401, an unknown or closed workspace 404. Every call is
appended to one audit log in the home and published as a `tool_call` event. A workspace is deleted
with its token on close, when its task ends (the final `task_result` event), when idle longer than
its request asked, and when the service stops.

The process holds no model credentials: `codeloop.services.provider_keys.restart_without_provider_keys()`
removes them from its environment at start (and so from every child: git, sandboxes), and it
needs nothing but NATS and its listener.
"""

import logging
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus
from starlette.applications import Starlette
from starlette.types import Receive, Send
from starlette.types import Scope as AsgiScope

from agents.workspace import materialize, open_scratch, workspace_patch
from agents.workspace.git import run_git
from agents.workspace.messages import (
    OPEN_SUBJECT,
    SERVICE_QUEUE,
    WorkspaceClose,
    WorkspaceClosed,
    WorkspaceDiff,
    WorkspaceOpen,
    WorkspaceOpened,
    WorkspacePatch,
    WorkspaceRefused,
    WorkspaceSync,
    service_subject,
)
from agents.workspace.start import apply_patch
from bus import subjects
from bus.connection import Bus
from bus.messages import Message
from bus.requests import respond, watch_subjects
from codeloop.config.serve_note import WorkspacesNote
from codeloop.services.audit_events import bus_audit_sink
from layout import INDEX_DIR, WORK_DIR, WORKSPACES_AUDIT
from tool_servers.protocol.audit import AuditLog
from tool_servers.protocol.http import TokenGrant, TokenTable, new_token, serve_asgi
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions

# Named as before the services package existed: logging configurations and filters name it.
log = logging.getLogger("codeloop.workspace_service")
SWEEP_INTERVAL_S = 10.0


@dataclass
class _Hosted:
    id: str
    task_id: str
    root: Path
    apps: dict[str, Starlette]
    idle_timeout_s: float
    closed: anyio.Event = field(default_factory=anyio.Event)
    gone: anyio.Event = field(default_factory=anyio.Event)
    """Set once its directory is deleted: a close is answered after that."""
    last_used: float = field(default_factory=time.monotonic)

    def touch(self) -> None:
        self.last_used = time.monotonic()


@dataclass(frozen=True)
class WorkspaceHosting:
    """What `codeloop serve --workspaces --workspace-*` asks for."""

    host: str = "127.0.0.1"
    port: int = 0
    public_url: str | None = None
    stripped_env: tuple[str, ...] = ()


class WorkspaceTools(Protocol):
    """The tool servers of one workspace (`codeloop.wiring.tools.InProcessTools`), built with the
    service's own options: its audit log and the workspace's bearer token."""

    def servers(
        self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None, options: ServerOptions
    ) -> dict[str, Any]: ...


class WorkspaceService:
    """See the module docstring; `hosting` says where it listens and which base URL clients reach
    the listener at (a Kubernetes Service name; default `http://HOST:PORT` of the listener)."""

    def __init__(self, bus: Bus, home: Path, *, tools: WorkspaceTools, hosting: WorkspaceHosting) -> None:
        self.bus = bus
        self.home = home
        self.tools = tools
        self.host = hosting.host
        self.port = hosting.port
        self.public_url = hosting.public_url
        self.stripped_env = list(hosting.stripped_env)
        self.id = f"ws{secrets.token_hex(6)}"
        self.work_dir = home / WORK_DIR
        self.audit = AuditLog(home / WORKSPACES_AUDIT, sink=bus_audit_sink(bus))
        self._hosted: dict[str, _Hosted] = {}
        self._tokens: dict[str, str] = {}
        self.base_url = ""
        self._tg: TaskGroup | None = None

    async def run(self, *, task_status: TaskStatus[WorkspacesNote] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; every workspace is deleted on the way out."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            bound: list[int] = []
            ready = anyio.Event()

            def on_started(port: int) -> None:
                bound.append(port)
                ready.set()

            tg.start_soon(
                lambda: serve_asgi(
                    self._dispatch, host=self.host, port=self.port, on_started=on_started, lifespan="off"
                )
            )
            await ready.wait()
            url_host = f"[{self.host}]" if ":" in self.host else self.host
            base = (self.public_url or f"http://{url_host}:{bound[0]}").rstrip("/")
            self.base_url = base
            await tg.start(
                lambda task_status: respond(
                    self.bus, OPEN_SUBJECT, self._answer, queue=SERVICE_QUEUE, task_status=task_status
                )
            )
            for verb in ("diff", "sync", "close"):
                await tg.start(
                    lambda task_status, verb=verb: respond(
                        self.bus,
                        service_subject(self.id, verb),  # pyright: ignore[reportArgumentType] - verb is one of the three literals of the loop
                        self._answer,
                        task_status=task_status,
                    )
                )
            # A task's end closes what its steps left open (a worker that died mid-step).
            await tg.start(
                lambda task_status: watch_subjects(
                    self.bus, "codeloop.events.*.result", self._task_ended, task_status=task_status
                )
            )
            tg.start_soon(self._sweep)
            task_status.started(
                WorkspacesNote(
                    service=self.id,
                    url=base,
                    audit_log=str(self.audit.path),
                    work_dir=str(self.work_dir),
                    stripped_env=self.stripped_env,
                )
            )

    async def _answer(self, request: Message) -> Message:
        try:
            if isinstance(request, WorkspaceOpen):
                return await self._open(request)
            if isinstance(request, WorkspaceDiff):
                hosted = self._hosted.get(request.workspace)
                if hosted is None:
                    return WorkspaceRefused(
                        failure_class="env.infra", message=f"no open workspace {request.workspace}"
                    )
                hosted.touch()
                patch = await workspace_patch(hosted.root)
                return WorkspacePatch(diff=patch.diff, files_changed=patch.files_changed)
            if isinstance(request, WorkspaceSync):
                hosted = self._hosted.get(request.workspace)
                if hosted is None:
                    return WorkspaceRefused(
                        failure_class="env.infra", message=f"no open workspace {request.workspace}"
                    )
                hosted.touch()
                await run_git(hosted.root, "reset", "-q", "--hard", "HEAD", scratch=True)
                await run_git(hosted.root, "clean", "-fdq", scratch=True)
                if request.patch:
                    await apply_patch(hosted.root, request.patch)
                patch = await workspace_patch(hosted.root)
                return WorkspacePatch(diff=patch.diff, files_changed=patch.files_changed)
            if isinstance(request, WorkspaceClose):
                hosted = self._hosted.pop(request.workspace, None)
                if hosted is not None:
                    hosted.closed.set()
                    await hosted.gone.wait()
                return WorkspaceClosed(workspace=request.workspace, existed=hosted is not None)
            return WorkspaceRefused(
                failure_class="agent.format",
                message=f"the workspace service takes no {request.kind}",  # pyright: ignore[reportAttributeAccessIssue] - every registered payload model declares its kind field
            )
        except Exception as exc:  # the asker gets the reason instead of a timeout
            log.warning("workspace request %s failed: %s: %s", request.kind, type(exc).__name__, exc)  # pyright: ignore[reportAttributeAccessIssue] - every registered payload model declares its kind field
            failure_class = getattr(exc, "failure_class", None) or "env.infra"
            return WorkspaceRefused(
                failure_class=failure_class, message=f"{type(exc).__name__}: {exc}"[:2000]
            )

    async def _open(self, request: WorkspaceOpen) -> Message:
        assert self._tg is not None
        hosted: _Hosted = await self._tg.start(self._hold, request)
        token = self._tokens[hosted.id]
        urls = {name: f"{self.base_url}/w/{hosted.id}/{name}/mcp" for name in hosted.apps}
        return WorkspaceOpened(workspace=hosted.id, service=self.id, urls=urls, token=token)

    async def _hold(self, request: WorkspaceOpen, *, task_status: TaskStatus[_Hosted]) -> None:
        """Own one workspace from materializing to deleting it (see `open_scratch`)."""
        hosted: _Hosted | None = None
        try:
            async with open_scratch(self.work_dir, request.task_id, request.label) as root:
                hosted = await self._serve_workspace(request, root, task_status)
        finally:
            if hosted is not None:
                hosted.gone.set()

    async def _serve_workspace(
        self, request: WorkspaceOpen, root: Path, task_status: TaskStatus[_Hosted]
    ) -> _Hosted:
        """Materialize into `root`, serve it until closed; the workspace, its token revoked."""
        await materialize(self.bus, request.snapshot, root)
        if request.patch:
            await apply_patch(root, request.patch)
        workspace = root.name
        token = new_token()
        grant = frozenset(Scope(s) for s in request.scopes)
        options = ServerOptions(
            scopes=grant,
            principal=f"{request.label}:{request.task_id}",
            audit=self.audit,
            token_verifier=TokenTable({token: TokenGrant(f"{request.label}:{request.task_id}", grant)}),
        )
        # One index per source tree, as a worker keeps one per repository: a task's later steps
        # and tasks on the same code update it instead of embedding everything again.
        index_dir = (
            self.home
            / INDEX_DIR
            / subjects.token(request.snapshot.source_path.replace("/", "_").strip("_") or "root")
        )
        servers = self.tools.servers(root, frozenset(request.scopes), index_dir=index_dir, options=options)
        apps = {
            name: server.streamable_http_app(
                streamable_http_path=f"/w/{workspace}/{name}/mcp", host=self.host
            )
            for name, server in servers.items()
        }
        hosted = _Hosted(workspace, request.task_id, root, apps, request.idle_timeout_s)
        try:
            async with AsyncExitStack() as stack:
                for app in apps.values():
                    await stack.enter_async_context(_lifespan(app))
                self._tokens[workspace] = token
                self._hosted[workspace] = hosted
                log.info(
                    "opened workspace %s for task %s (%s)",
                    workspace,
                    request.task_id,
                    ",".join(request.scopes),
                )
                task_status.started(hosted)
                await hosted.closed.wait()
        finally:
            # Revoked before the files go: no request reaches a half-deleted tree.
            self._hosted.pop(workspace, None)
            self._tokens.pop(workspace, None)
            log.info("closed workspace %s", workspace)
        return hosted

    async def _task_ended(self, subject: str) -> None:
        task = subject.split(".")[2]
        for hosted in list(self._hosted.values()):
            if subjects.token(hosted.task_id) == task:
                log.info("task %s ended: closing its workspace %s", hosted.task_id, hosted.id)
                self._hosted.pop(hosted.id, None)
                hosted.closed.set()

    async def _sweep(self) -> None:
        while True:
            await anyio.sleep(SWEEP_INTERVAL_S)
            now = time.monotonic()
            for hosted in list(self._hosted.values()):
                if now - hosted.last_used > hosted.idle_timeout_s:
                    log.info("workspace %s idle for %.0f s: closing it", hosted.id, now - hosted.last_used)
                    self._hosted.pop(hosted.id, None)
                    hosted.closed.set()

    async def _dispatch(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        """The one listener's ASGI app: `/w/<workspace>/<server>/mcp` to that server's app."""
        parts = str(scope.get("path", "")).split("/")
        hosted = self._hosted.get(parts[2]) if len(parts) == 5 and parts[1] == "w" else None
        app = hosted.apps.get(parts[3]) if hosted is not None else None
        if scope["type"] != "http" or app is None or hosted is None:
            if scope["type"] == "http":
                await _not_found(send)
            return
        hosted.touch()
        await app(scope, receive, send)


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    # The app's own lifespan runs its MCP session manager (a task group for its sessions).
    async with app.router.lifespan_context(app):
        yield


async def _not_found(send: Send) -> None:
    body = b'{"error": "no such workspace or server (closed, or never opened here)"}'
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
