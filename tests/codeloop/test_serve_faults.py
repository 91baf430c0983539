"""`codeloop serve` under faults, in real processes: one serve per state directory, the embedded
nats-server's death noticed and repaired, and clients that reconnect across restarts."""

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import ByteReceiveStream, Process

from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _repo(tmp_path: Path) -> Path:
    """A repository apart from the test's state dir, whose files change while a task is captured."""
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    return repo


def _nats_server_pid(home: Path) -> int:
    """The embedded server's pid, from the ports file it writes into its state directory."""
    (ports,) = (home / "nats" / "ports").glob("nats-server_*.ports")
    return int(ports.stem.removeprefix("nats-server_"))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


class Lines:
    """Reads a process's output line by line, keeping what was read."""

    def __init__(self, stream: ByteReceiveStream) -> None:
        self.stream, self.buffer, self.seen = stream, b"", ""

    async def until(self, text: str) -> str:
        while text not in self.seen:
            try:
                chunk = await self.stream.receive()
            except anyio.EndOfStream:
                raise AssertionError(f"stream ended before {text!r}; saw:\n{self.seen}") from None
            self.seen += chunk.decode(errors="replace")
        return self.seen


async def _codeloop(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([*CODELOOP, *args], env=codeloop_env(home), check=False)


@asynccontextmanager
async def _process(home: Path, *args: str) -> AsyncIterator[Process]:
    process = await anyio.open_process([*CODELOOP, *args], env=codeloop_env(home))
    try:
        yield process
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            await process.aclose()


async def _submit(home: Path, text: str, repo: Path) -> str:
    submitted = await _codeloop(home, "submit", text, "--repo", str(repo), "--json")
    assert submitted.returncode == 0, submitted.stderr
    return json.loads(submitted.stdout)["task_id"]


async def test_a_second_serve_on_a_state_dir_is_refused_and_the_first_keeps_running(tmp_path: Path) -> None:
    """One serve per state directory: the second says who holds it and exits 1, without stopping
    the first one's nats-server or touching its serve.json."""
    home = tmp_path / "home"
    with anyio.fail_after(60):
        async with running_serve(home, "--no-mcp") as (first, note):
            server_pid = _nats_server_pid(home)
            note_before = (home / "serve.json").read_text()
            second = await _codeloop(home, "serve", "--no-mcp")
            assert second.returncode == 1
            message = second.stderr.decode()
            assert f"in use by another codeloop serve (pid {first.pid})" in message
            assert "Traceback" not in message and len(message.strip().splitlines()) == 1
            assert "StateDirBusy" not in message  # the person's words, not the exception's class
            assert _alive(server_pid)
            assert (home / "serve.json").read_text() == note_before
            task_id = await _submit(home, "still served", _repo(tmp_path))
            watched = await _codeloop(home, "watch", task_id)
            assert b"result: done  still served" in watched.stdout


async def test_a_stale_lock_of_a_sigkilled_serve_is_taken_over(tmp_path: Path) -> None:
    """A serve killed outright leaves its lock file; the next serve takes it over and works."""
    home = tmp_path / "home"
    with anyio.fail_after(60):
        async with running_serve(home, "--no-mcp") as (first, _):
            first.kill()
            await first.wait()
        assert (home / "owner.lock").exists()
        async with running_serve(home, "--no-mcp") as (second, note):
            assert note["pid"] == second.pid
            task_id = await _submit(home, "after a crash", _repo(tmp_path))
            watched = await _codeloop(home, "watch", task_id)
            assert watched.returncode == 0, watched.stderr


async def test_a_sigkilled_embedded_server_is_restarted_and_a_task_in_flight_reaches_its_watch(
    tmp_path: Path,
) -> None:
    """The embedded server's death is noticed at once: serve logs it, restarts it on the same store
    and port, and the task (waiting for its echo worker) finishes and reaches the attached watch."""
    home, worker_home = tmp_path / "home", tmp_path / "worker-home"
    with anyio.fail_after(90):
        async with running_serve(home, "--no-mcp", "--role", "orchestrator") as (serve, note):
            assert serve.stderr is not None
            task_id = await _submit(home, "through a crash", _repo(tmp_path))
            async with _process(home, "watch", task_id) as watch:
                assert watch.stdout is not None
                watched = Lines(watch.stdout)
                await watched.until("task submitted")  # attached, and the task is in flight
                old_pid = _nats_server_pid(home)
                os.kill(old_pid, signal.SIGKILL)
                log = await Lines(serve.stderr).until("is back")
                assert f"(pid {old_pid}) died" in log and "restarting it on the same store and port" in log
                assert str(home / "nats" / "nats-server.log") in log
                assert json.loads((home / "serve.json").read_text())["nats_url"] == note["nats_url"]
                # The echo worker joins only now, so the task cannot have finished before the crash.
                worker = ["serve", "--no-mcp", "--role", "echo", "--nats", note["nats_url"]]
                creds = json.loads((home / "nats-credentials.json").read_text())  # the embedded server's
                async with _process(
                    worker_home, *worker, "--user", creds["user"], "--password", creds["password"]
                ):
                    await watched.until("result: done  through a crash")
                    assert await watch.wait() == 0
            status = await _codeloop(home, "status", task_id, "--json")
            assert json.loads(status.stdout)["status"] == "done"


async def test_a_watch_reconnects_across_a_serve_restart_and_sees_the_result(tmp_path: Path) -> None:
    """A stable address: the restarted serve's embedded server gets the same port, and a watch
    attached before the restart follows the task to its end."""
    home = tmp_path / "home"
    with anyio.fail_after(90):
        async with running_serve(home, "--no-mcp", "--role", "orchestrator") as (serve, first_note):
            task_id = await _submit(home, "across a restart", _repo(tmp_path))
            async with _process(home, "watch", task_id) as watch:
                assert watch.stdout is not None
                watched = Lines(watch.stdout)
                await watched.until("task submitted")
                serve.send_signal(signal.SIGTERM)
                assert await serve.wait() == 0
                async with running_serve(home, "--no-mcp") as (_, second_note):
                    assert second_note["nats_url"] == first_note["nats_url"]
                    await watched.until("result: done  across a restart")
                    assert await watch.wait() == 0
            # Each event once: the resubscription after the restart repeats nothing.
            assert watched.seen.count("task submitted") == 1
