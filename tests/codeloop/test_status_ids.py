"""The small things a user trips over: whole task ids in the `status` table, unique prefixes
resolving in `status` and `watch`, and `codeloop --version`."""

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from codeloop import __version__
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve

pytestmark = pytest.mark.anyio


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
                    home, "submit", "hi", "--repo", str(tmp_path), "--task-id", task_id
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
