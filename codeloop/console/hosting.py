"""Host the console in `codeloop serve`: its token, its app, its listener.

Bound to 127.0.0.1 unless `--console-host` says otherwise. Without `--console-token-file` a
fresh token is made at every start and written 0600 to `STATE_DIR/console-token` (removed again
when serve stops), as serve does for its MCP token: a leaked token dies with the process that
made it. uvicorn's access log stays off: a first request carries the token in its address.
"""

from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import TaskStatus

from bus.connection import Bus
from codeloop.config.serve_note import ConsoleNote
from codeloop.console.access import AccessTable, remove_generated_token, write_generated_token
from codeloop.console.app import ConsoleConfig, build_app
from codeloop.console.assets import htmx_path
from codeloop.console.tasks import ConsoleTasks
from codeloop.services.tasks_backend import DEFAULT_MAX_RUNNING, BusTasks
from tool_servers.protocol.http import serve_asgi
from tool_servers.protocol.scopes import Scope


@dataclass(frozen=True)
class ConsoleHosting:
    """What `codeloop serve --console-*` asks for."""

    root: Path
    """Repositories a submission may name lie under it (serve's `--mcp-root`)."""
    scopes: frozenset[Scope] = frozenset({Scope.READ})
    """The generated token's scopes (serve's `--mcp-scopes`): they bound the modes it submits."""
    host: str = "127.0.0.1"
    port: int = 0
    token_file: Path | None = None
    """`TOKEN PRINCIPAL SCOPES` lines replacing the generated token; None: generate one."""
    reports: tuple[Path, ...] = field(default_factory=tuple)
    """Directories of `codeloop eval` and `codeloop swebench` runs to show."""
    max_running: int = DEFAULT_MAX_RUNNING


async def host_console(
    hosting: ConsoleHosting,
    *,
    bus: Bus,
    state_dir: Path,
    task_status: TaskStatus[ConsoleNote] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the console until cancelled; `task_status.started(ConsoleNote)` once it listens.

    Raises:
        AccessFileError: the token file is unreadable or malformed.
        MissingAsset: htmx is not installed.
        OSError: it cannot listen on `hosting.host:port`.
    """
    htmx_path()  # before listening: a console without its script is refused at start
    token: str | None = None
    if hosting.token_file is not None:
        access = AccessTable.from_file(hosting.token_file)
        token_file = hosting.token_file
    else:
        access, token = AccessTable.generated(hosting.scopes)
        token_file = write_generated_token(state_dir, token)
    backend = await BusTasks.open(bus, max_running=hosting.max_running)
    tasks = ConsoleTasks(bus, backend, root=hosting.root)
    app = build_app(ConsoleConfig(tasks=tasks, access=access, reports=list(hosting.reports)))
    shown = f"[{hosting.host}]" if ":" in hosting.host else hosting.host

    def started(port: int) -> None:
        url = f"http://{shown}:{port}/"
        task_status.started(ConsoleNote(url=url, token_file=str(token_file), generated=token is not None))

    try:
        await serve_asgi(
            app, host=hosting.host, port=hosting.port, on_started=started, lifespan="off", access_log=False
        )
    finally:
        if token is not None:
            remove_generated_token(token_file, token)
