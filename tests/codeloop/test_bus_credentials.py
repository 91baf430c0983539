"""The embedded bus requires the credentials `codeloop serve` generates; the CLI finds them."""

import json
import os
import stat
import subprocess
from pathlib import Path

import anyio
import pytest

from bus.config import BusConfig
from bus.connection import open_bus
from bus.credentials import CREDENTIALS_FILE, SERVER_CONFIG_FILE
from bus.errors import BusClosed
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve

pytestmark = pytest.mark.anyio


@pytest.mark.slow  # a serve process
async def test_a_client_without_the_generated_credentials_is_refused_and_the_cli_finds_them(
    tmp_path: Path, repo: Path
) -> None:
    """Anyone on the machine could read the events stream of an open embedded NATS: serve now
    requires a generated user/password kept 0600 in the home, and submit/status use it unasked."""
    home = tmp_path / "home"
    with anyio.fail_after(90):
        async with running_serve(home, "--no-mcp") as (_serve, note):
            creds_path = home / CREDENTIALS_FILE
            assert note["credentials_file"] == str(creds_path)
            assert stat.S_IMODE(creds_path.stat().st_mode) == 0o600
            assert stat.S_IMODE((home / SERVER_CONFIG_FILE).stat().st_mode) == 0o600
            creds = json.loads(creds_path.read_text())
            url = note["nats_url"]
            server_pid = next((home / "nats" / "ports").glob("nats-server_*.ports")).stem.split("_")[1]
            cmdline = await anyio.Path(f"/proc/{server_pid}/cmdline").read_bytes()
            assert creds["password"].encode() not in cmdline  # not visible to other local users

            with pytest.raises(BusClosed):
                async with open_bus(BusConfig(servers=(url,))):
                    pass
            with pytest.raises(BusClosed):
                async with open_bus(BusConfig(servers=(url,), user=creds["user"], password="guess")):
                    pass
            async with open_bus(
                BusConfig(servers=(url,), user=creds["user"], password=creds["password"])
            ) as bus:
                await bus.js.account_info()

            env = codeloop_env(home)
            submitted = await anyio.run_process(
                [*CODELOOP, "submit", "hello", "--repo", str(repo), "--json"], env=env, check=False
            )
            assert submitted.returncode == 0, submitted.stderr.decode()
            task_id = json.loads(submitted.stdout)["task_id"]
            status = await anyio.run_process([*CODELOOP, "status", task_id, "--json"], env=env, check=False)
            assert status.returncode == 0 and json.loads(status.stdout)["task_id"] == task_id


def test_the_credentials_survive_a_restart_and_stay_private(tmp_path: Path) -> None:
    """Generated once per home and reused (clients keep working across restarts); a widened
    file is made 0600 again at the next start."""
    from bus.credentials import ensure_credentials

    first = ensure_credentials(tmp_path)
    os.chmod(tmp_path / CREDENTIALS_FILE, 0o644)
    again = ensure_credentials(tmp_path)
    assert again == first and len(first.password) >= 40
    assert stat.S_IMODE((tmp_path / CREDENTIALS_FILE).stat().st_mode) == 0o600


def test_a_corrupt_credentials_file_is_a_clear_cli_error(tmp_path: Path) -> None:
    """A damaged file says which file and what to do, not a traceback."""
    home = tmp_path / "home"
    home.mkdir()
    (home / CREDENTIALS_FILE).write_text("not json")
    (home / "serve.json").write_text(
        json.dumps(
            {
                "nats_url": "nats://127.0.0.1:1",
                "pid": os.getpid(),
                "state_dir": str(home),
                "roles": [],
                "embedded": True,
                "credentials_file": str(home / CREDENTIALS_FILE),
            }
        )
    )
    result = subprocess.run(
        [*CODELOOP, "status", "--json"], env=codeloop_env(home), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "is not a readable NATS credentials file" in result.stderr and "Traceback" not in result.stderr


def test_a_password_in_a_nats_url_is_not_repeated_in_the_error(tmp_path: Path) -> None:
    """CLI errors quote the URL they could not reach; the password in it is masked."""
    result = subprocess.run(
        [*CODELOOP, "status", "--nats", "nats://alice:Pl4nted-Passw0rd@127.0.0.1:1"],
        env=codeloop_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "nats://alice:[redacted]@127.0.0.1:1" in result.stderr and "Pl4nted-Passw0rd" not in result.stderr
