"""End-to-end tasks: real nats-server, real roles, real MCP sessions and sandbox; only the model's
decisions are scripted (`tests/e2e/scripted.py`, loaded as `function:` model files)."""

import hashlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest

from tests.processes import processes_mentioning

SCRIPTED = Path(__file__).with_name("scripted.py")


def tree_digest(root: Path) -> dict[str, str]:
    """Every file and directory under `root` (.git included) with its content hash and mode."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        stat = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        out[rel] = f"{stat.st_mode:o}:{hashlib.sha256(data).hexdigest()}"
    return out


def model(name: str) -> str:
    return f"function:{SCRIPTED}:{name}"


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path):
    yield
    assert processes_mentioning(tmp_path) == []


@pytest.fixture
async def pipeline(tmp_path: Path) -> AsyncIterator[Callable]:
    """Every role of a `codeloop serve` in this process on a private embedded nats-server; yields
    `run(task) -> TaskResult` which captures the repository, submits and waits for the result."""
    from agents.client import submit_task, watch_task
    from agents.messages import TaskResult
    from agents.workspace import capture_snapshot
    from bus.actor import DeliveryPolicy
    from bus.config import BusConfig
    from bus.connection import open_bus
    from codeloop.config.serve_note import client_config_for
    from codeloop.wiring.process import Workers, serve

    config = BusConfig(state_dir=tmp_path / "state")
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        note = await tg.start(
            lambda task_status: serve(
                config,
                stop=stop,
                workers=Workers(policy=DeliveryPolicy(ack_wait_s=10)),
                task_status=task_status,
            )
        )
        client_config = client_config_for(config, note)
        async with open_bus(client_config) as bus:

            async def run(
                task, *, snapshot: bool = True, before_submit=None, timeout_s: float = 180
            ) -> TaskResult:
                if snapshot:
                    task = task.model_copy(update={"snapshot": await capture_snapshot(bus, Path(task.repo))})
                if before_submit is not None:
                    before_submit()
                envelope, _ = await submit_task(bus, task)
                with anyio.fail_after(timeout_s):
                    final = await watch_task(bus, envelope.task_id, lambda e: None)
                return TaskResult.model_validate(final.payload)

            run.bus = bus
            run.nats_url = note.nats_url
            # the embedded server's generated credentials, for the command-line clients of a test
            run.auth_env = {
                "CODELOOP_NATS_USER": client_config.user or "",
                "CODELOOP_NATS_PASSWORD": client_config.password or "",
            }
            yield run
        stop.set()
