"""The small things a user trips over: whole task ids in the `status` table, unique prefixes
resolving in `status` and `watch`, and `codeloop --version`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from bus.connection import open_bus
from codeloop import __version__
from codeloop.config.serve_note import client_bus_config
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ROOT = Path(__file__).parents[2]
CRASH_WORKER = ROOT / "tests" / "bus" / "crash_worker.py"


def _repo(tmp_path: Path) -> Path:
    """A repository apart from the test's state dir, whose files change while a task is captured."""
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    return repo


async def _codeloop(home: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[bytes]:
    env = {**codeloop_env(home), "COLUMNS": str(columns)}
    return await anyio.run_process([*CODELOOP, *args], env=env, check=False)


async def test_the_status_table_shows_whole_ids_and_unique_prefixes_resolve(tmp_path: Path) -> None:
    """A 32-character id in a 60-column terminal used to be cut (and could not be pasted into
    `watch`); a prefix that fits one task names it, one that fits several is refused."""
    home = tmp_path / "home"
    with anyio.fail_after(60):
        async with running_serve(home, "--no-mcp"):
            ids = []
            for task_id in ("alpha-" + "1" * 26, "alpha-" + "2" * 26, "beta-" + "3" * 27):
                submitted = await _codeloop(
                    home, "submit", "hi", "--repo", str(_repo(tmp_path)), "--task-id", task_id
                )
                assert submitted.returncode == 0, submitted.stderr
                ids.append(task_id)
            for task_id in ids:
                assert (await _codeloop(home, "watch", task_id)).returncode == 0
            table = (await _codeloop(home, "status", columns=60)).stdout.decode()
            for task_id in ids:
                assert task_id in table, table
            one = await _codeloop(home, "status", "beta", "--json")
            assert one.returncode == 0 and json.loads(one.stdout)["task_id"] == ids[2]
            watched = await _codeloop(home, "watch", "alpha-2")
            assert watched.returncode == 0 and b"result: done  hi" in watched.stdout
            ambiguous = await _codeloop(home, "status", "alpha")
            assert ambiguous.returncode == 2
            assert b"fits 2 tasks" in ambiguous.stderr and ids[0].encode() in ambiguous.stderr


async def test_version_flag_prints_the_version(tmp_path: Path) -> None:
    result = await _codeloop(tmp_path, "--version")
    assert result.returncode == 0 and result.stdout.decode().strip() == __version__


async def test_status_says_a_task_waits_for_redelivery_after_its_worker_died(tmp_path: Path) -> None:
    """After a worker is killed holding a task's message, the record alone shows no progress and
    the task looks stuck; status says the message is handed out and not acknowledged, to be
    redelivered after the ack wait."""
    home = tmp_path / "home"
    with anyio.fail_after(90):
        async with running_serve(home, "--no-mcp", "--role", "orchestrator") as (_, note):
            config = client_bus_config(state_dir=home)
            async with open_bus(config) as bus:
                await bus.js.create_key_value(bucket="test-effects")
                holding = await bus.nc.subscribe("test.holding")
                worker = await anyio.open_process(
                    [
                        sys.executable,
                        str(CRASH_WORKER),
                        note["nats_url"],
                        "hold-before-effect",
                        str(tmp_path),
                    ],
                    env={
                        **os.environ,
                        "PYTHONPATH": str(ROOT),
                        "CODELOOP_NATS_USER": config.user or "",
                        "CODELOOP_NATS_PASSWORD": config.password or "",
                    },
                )
                try:
                    submitted = await _codeloop(
                        home, "submit", "held", "--repo", str(_repo(tmp_path)), "--json"
                    )
                    task_id = json.loads(submitted.stdout)["task_id"]
                    await holding.next_msg(timeout=30)
                finally:
                    worker.kill()
                    await worker.wait()
                    await worker.aclose()
            table = (await _codeloop(home, "status", columns=250)).stdout.decode()
            one = await _codeloop(home, "status", task_id, "--json")
    flat = " ".join(table.replace("│", " ").split())  # the note wraps inside its cell
    assert task_id in table and "not yet acknowledged" in flat and "redelivered 1 s after" in flat
    assert json.loads(one.stdout)["status"] == "coding"  # the record moved on; only its message waits
    assert f"{task_id}: handed to codeloop-echo, not yet acknowledged" in one.stderr.decode()
