"""`codeloop submit` refuses what the bus cannot carry before anything is published: oversized
and blank task texts, read from argv, `@FILE` or stdin.

The tests that need a server share one `codeloop serve` (`serve_home`): each submits its own
tasks and looks only at those, or at what changed while it ran."""

import json
import subprocess
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import anyio
import pytest

from bus.connection import open_bus
from bus.errors import PayloadTooLarge
from bus.validation import MAX_TASK_TEXT_BYTES
from codeloop.config.serve_note import client_bus_config
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve
from tests.processes import processes_mentioning

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-scoped, so the module's one serve (an async fixture) can live across its tests."""
    return "asyncio"


@pytest.fixture(scope="module")
async def serve_home(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Path]:
    """The home of one `codeloop serve --no-mcp` (the echo pipeline) for this module's tests; its
    output is read all along, so a long-lived serve never blocks on a full pipe. Stopped, and
    checked gone, after the module. Its start may take long on a loaded machine: it is waited for
    once, and then no test's own time limit pays for it."""
    home = tmp_path_factory.mktemp("submit-limits") / "home"
    serving = running_serve(home, "--no-mcp", ready_s=300)
    async with serving as (process, _), anyio.create_task_group() as drain:
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                drain.start_soon(_discard, stream)
        yield home
        drain.cancel_scope.cancel()
    assert processes_mentioning(home) == []


async def _discard(stream: anyio.abc.ByteReceiveStream) -> None:
    async for _ in stream:
        pass


def _repo(tmp_path: Path) -> Path:
    """A repository apart from the test's state dir, whose files change while a task is captured."""
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    return repo


async def _codeloop(home: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    # subprocess.run, not anyio's: submit stops reading stdin past the limit, and only
    # `communicate` takes the broken pipe of the unread rest as the normal case it is.
    run = partial(
        subprocess.run, [*CODELOOP, *args], env=codeloop_env(home), input=stdin, capture_output=True
    )
    return await anyio.to_thread.run_sync(run)


async def _task_ids(home: Path) -> list[str]:
    listing = await _codeloop(home, "status", "--json")
    assert listing.returncode == 0, listing.stderr
    return [record["task_id"] for record in json.loads(listing.stdout)]


@pytest.mark.slow
async def test_600_kb_and_5_mb_tasks_are_refused_at_submission_with_the_limit(
    tmp_path: Path, serve_home: Path
) -> None:
    """An oversized task used to crash-loop the orchestrator on MaxPayloadError; now submit exits 2
    naming the limit, and no task record appears."""
    home = serve_home
    big_file = tmp_path / "task.txt"
    big_file.write_text("x" * 600_000)
    with anyio.fail_after(60):
        before = await _task_ids(home)
        from_file = await _codeloop(home, "submit", f"@{big_file}", "--repo", str(_repo(tmp_path)))
        from_stdin = await _codeloop(
            home, "submit", "-", "--repo", str(_repo(tmp_path)), stdin=b"y" * 5_000_000
        )
        for refused, size in ((from_file, "600,000 bytes (586 KiB)"), (from_stdin, "5,000,000 bytes")):
            assert refused.returncode == 2
            message = refused.stderr.decode()
            # The real size, not the limit plus the one byte read past it.
            assert f"is {size}" in message and f"{MAX_TASK_TEXT_BYTES + 1:,}" not in message, message
            assert f"the limit is {MAX_TASK_TEXT_BYTES:,} bytes" in message, message
            assert "Traceback" not in message and len(message.strip().splitlines()) == 1
        assert await _task_ids(home) == before


@pytest.mark.slow
async def test_a_task_at_the_limit_from_a_file_is_carried_end_to_end(
    tmp_path: Path, serve_home: Path
) -> None:
    """The limit leaves room for every message and record the task becomes (its record holds the
    text twice: as the task and as the echo's answer)."""
    home = serve_home
    task_file = tmp_path / "task.txt"
    text = "é" * (MAX_TASK_TEXT_BYTES // 2)
    task_file.write_text(text)
    with anyio.fail_after(60):
        submitted = await _codeloop(home, "submit", f"@{task_file}", "--repo", str(_repo(tmp_path)), "--json")
        assert submitted.returncode == 0, submitted.stderr
        task_id = json.loads(submitted.stdout)["task_id"]
        watched = await _codeloop(home, "watch", task_id)
        assert watched.returncode == 0, watched.stderr
        record = json.loads((await _codeloop(home, "status", task_id, "--json")).stdout)
        assert record["status"] == "done"
        assert record["task"]["text"] == text == record["result"]["answer"]


@pytest.mark.slow
async def test_blank_unreadable_and_non_utf8_task_texts_are_refused_before_connecting(tmp_path: Path) -> None:
    """Each is a one-line usage error (exit 2); no server is needed to find out."""
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    cases = {
        ("   \n\t",): "only whitespace",
        ("-",): "only whitespace",  # empty stdin
        (f"@{tmp_path / 'missing.txt'}",): "cannot read the task text from",
        (f"@{tmp_path / 'latin1.txt'}",): "is not UTF-8 text",
        ("ok", "--task-id", "mcp"): "reserved",
        ("ok", "--mode", "admin"): "is not one of read, write, execute",
    }
    for args, expected in cases.items():
        result = await _codeloop(tmp_path, "submit", *args, "--repo", str(_repo(tmp_path)), stdin=b"")
        message = result.stderr.decode()
        assert result.returncode == 2 and expected in message, (args, message)
        assert len(message.strip().splitlines()) == 1


@pytest.mark.slow
async def test_a_literal_at_sign_text_is_written_with_two(tmp_path: Path, serve_home: Path) -> None:
    """`@@x` submits the text `@x` (a handle, a decorator) instead of reading a file named x."""
    home = serve_home
    with anyio.fail_after(60):
        submitted = await _codeloop(home, "submit", "@@dataclass", "--repo", str(_repo(tmp_path)), "--json")
        task_id = json.loads(submitted.stdout)["task_id"]
        watched = await _codeloop(home, "watch", task_id)
        assert b"result: done  @dataclass" in watched.stdout


async def test_a_message_over_the_servers_max_payload_is_refused_before_sending(serve_home: Path) -> None:
    """No message the system writes may exceed the server's max payload: the bus refuses it
    with both sizes, and the stream is unchanged."""
    home = serve_home
    with anyio.fail_after(60):
        async with open_bus(client_bus_config(state_dir=home)) as bus:
            before = (await bus.js.stream_info("CODELOOP_TASKS")).state.messages
            size = bus.nc.max_payload + 1
            with pytest.raises(PayloadTooLarge, match=f"{size:,} bytes.*max payload of {size - 1:,}"):
                await bus.publish_bytes("codeloop.task.submit", b"x" * size)
            assert (await bus.js.stream_info("CODELOOP_TASKS")).state.messages == before
