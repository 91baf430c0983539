"""`codeloop serve | submit | watch | status | schema` as a user runs them, in real processes."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.anyio
CODELOOP = [sys.executable, "-m", "codeloop"]


def _repo(tmp_path: Path) -> Path:
    """A repository apart from the test's state dir, whose files change while a task is captured."""
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    return repo


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODELOOP_")}
    env["CODELOOP_HOME"] = str(home)
    return env


async def _codeloop(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([*CODELOOP, *args], env=_env(home), check=False)


@pytest.mark.slow  # a serve process and a task
async def test_serve_submit_watch_status_carry_a_task_and_serve_stops_cleanly_on_ctrl_c(
    tmp_path: Path,
) -> None:
    """Serve says where NATS is; submit prints an id; watch ends at the result; Ctrl-C stops all."""
    home = tmp_path / "home"
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [*CODELOOP, "serve", "--pipeline", "echo"], env=_env(home)
        ) as serve:
            assert serve.stdout is not None
            banner = b""
            while b"Press Ctrl-C" not in banner:
                banner += await serve.stdout.receive()
            assert b"nats://127.0.0.1:" in banner and str(home).encode() in banner
            assert b"orchestrator, echo" in banner

            submitted = await _codeloop(home, "submit", "hello bus", "--repo", str(_repo(tmp_path)), "--json")
            assert submitted.returncode == 0, submitted.stderr
            task_id = json.loads(submitted.stdout)["task_id"]
            watched = await _codeloop(home, "watch", task_id)
            assert watched.returncode == 0, watched.stderr
            assert b"result: done  hello bus" in watched.stdout
            status = await _codeloop(home, "status", task_id, "--json")
            assert json.loads(status.stdout)["status"] == "done"
            listing = await _codeloop(home, "status", "--json")
            assert [s["task_id"] for s in json.loads(listing.stdout)] == [task_id]

            serve.send_signal(signal.SIGINT)
            assert await serve.wait() == 0
    assert not (home / "serve.json").exists()


@pytest.mark.slow
async def test_client_commands_without_a_server_say_what_to_do(tmp_path: Path) -> None:
    """STYLE CLI conventions: no URL and no running serve is a clear error, not a traceback."""
    result = await _codeloop(tmp_path, "status")
    assert result.returncode == 2
    assert b"codeloop serve" in result.stderr and b"--nats" in result.stderr
    assert b"Traceback" not in result.stderr
    unreachable = await _codeloop(tmp_path, "status", "--nats", "nats://127.0.0.1:1")
    assert unreachable.returncode == 1 and b"cannot connect" in unreachable.stderr


async def test_schema_prints_the_envelope_and_payload_schemas(tmp_path: Path) -> None:
    """`codeloop schema` exports JSON Schema for agents in other languages."""
    result = await _codeloop(tmp_path, "schema")
    schemas = json.loads(result.stdout)
    assert schemas["envelope"]["title"] == "Envelope"
    assert {"task_submitted", "dead_letter", "echo_request"} <= set(schemas["payloads"])


def _undocumented(schema: dict[str, object], where: str) -> list[str]:
    """Every model, enum and property under `schema` (its `$defs` included) without a description."""
    missing = [] if schema.get("description") else [where]
    properties = schema.get("properties", {})
    assert isinstance(properties, dict)
    missing += [f"{where}.{name}" for name, prop in properties.items() if not prop.get("description")]
    definitions = schema.get("$defs", {})
    assert isinstance(definitions, dict)
    for name, definition in definitions.items():
        missing += _undocumented(definition, f"{where} $defs/{name}")
    return missing


async def test_schema_describes_every_kind_and_every_field(tmp_path: Path) -> None:
    """An agent in another language learns from `codeloop schema` alone what each message and
    field means: a model or field added without a docstring fails here."""
    result = await _codeloop(tmp_path, "schema")
    assert result.returncode == 0, result.stderr
    schemas = json.loads(result.stdout)
    missing = _undocumented(schemas["envelope"], "envelope")
    for kind, schema in schemas["payloads"].items():
        missing += _undocumented(schema, kind)
    assert not missing, "undocumented in `codeloop schema`:\n" + "\n".join(missing)
    # Nested models and enums are described where they are defined, and reached through `$ref`.
    task_state = schemas["payloads"]["task_state"]
    assert task_state["$defs"]["FailureClass"]["description"]
    assert task_state["properties"]["task"]["$ref"] == "#/$defs/TaskSubmitted"
