"""The health endpoint of the long-running processes, probed as Kubernetes does: real processes,
real NATS, plain HTTP GETs."""

import signal
from pathlib import Path

import anyio
import httpx2
import pytest

from bus.server import free_loopback_port, open_nats_server
from tests.codeloop.serve_support import CODELOOP, codeloop_env, running_serve
from tests.processes import stop_process

pytestmark = pytest.mark.anyio


async def _get(url: str) -> tuple[int, dict]:
    async with httpx2.AsyncClient(timeout=5) as http:
        response = await http.get(url)
        return response.status_code, response.json()


async def _until(url: str, status: int) -> dict:
    """The body of `url` once it answers `status` (readiness follows the connection within seconds)."""
    with anyio.fail_after(30):
        while True:
            code, body = await _get(url)
            if code == status:
                return body
            await anyio.sleep(0.2)


@pytest.mark.slow
async def test_serve_is_live_and_ready_while_connected_and_not_ready_once_nats_is_gone(
    tmp_path: Path,
) -> None:
    """A worker joining an existing NATS: /healthz 200 and /readyz 200 naming its checks while
    connected; with the server SIGKILLed /readyz turns 503 naming the NATS check while /healthz
    stays 200 (the process lives on, reconnecting); an unknown path is a 404 that names the paths."""
    port = free_loopback_port()
    base = f"http://127.0.0.1:{port}"
    with anyio.fail_after(90):
        async with open_nats_server(tmp_path / "nats") as nats:
            args = (
                "--nats",
                nats.url,
                "--role",
                "echo",
                "--no-mcp",
                "--no-metrics",
                "--health-port",
                str(port),
            )
            async with running_serve(tmp_path / "home", *args) as (serve, note):
                assert note["roles"] == ["echo"]
                assert await _get(f"{base}/healthz") == (200, {"status": "ok"})
                assert await _until(f"{base}/readyz", 200) == {
                    "status": "ready",
                    "checks": {"nats": True, "actors": True},
                }
                code, body = await _get(f"{base}/metrics")
                assert code == 404 and "/healthz" in body["error"]

                nats.process.send_signal(signal.SIGKILL)
                assert await _until(f"{base}/readyz", 503) == {
                    "status": "not ready",
                    "checks": {"nats": False, "actors": True},
                }
                assert await _get(f"{base}/healthz") == (200, {"status": "ok"})
                assert serve.returncode is None


@pytest.mark.slow
async def test_http_tool_server_is_ready_once_listening_and_stdio_refuses_a_health_port(
    tmp_path: Path, repo: Path
) -> None:
    """`codeloop mcp fs --transport http --health-port P`: live and ready (listening) on P while it
    serves /mcp; over stdio the option is a usage error (exit 2) saying why."""
    tokens = tmp_path / "tokens"
    tokens.write_text("probe-token-0123456789abcdef probe read\n")
    tokens.chmod(0o600)
    port = free_loopback_port()
    env = codeloop_env(tmp_path / "home")
    command = [*CODELOOP, "mcp", "fs", "--root", str(repo), "--transport", "http", "--port", "0"]
    process = await anyio.open_process(
        [*command, "--token-file", str(tokens), "--health-port", str(port)], env=env
    )
    try:
        with anyio.fail_after(60):
            assert process.stdout is not None
            url = (await process.stdout.receive()).decode().strip()
            assert url.endswith("/mcp")
            assert await _until(f"http://127.0.0.1:{port}/readyz", 200) == {
                "status": "ready",
                "checks": {"listening": True},
            }
            assert await _get(f"http://127.0.0.1:{port}/healthz") == (200, {"status": "ok"})
    finally:
        await stop_process(process)
        await process.aclose()

    stdio = await anyio.run_process(
        [*CODELOOP, "mcp", "fs", "--root", str(repo), "--health-port", str(port)], env=env, check=False
    )
    assert stdio.returncode == 2
    assert b"--health-port needs --transport http" in stdio.stderr


@pytest.mark.slow
async def test_tasks_server_is_ready_while_its_bus_is_and_leaves_model_keys_to_the_workers(
    tmp_path: Path, repo: Path
) -> None:
    """`codeloop mcp tasks --nats URL --transport http --health-port P --worker-credentials`, as its
    Kubernetes pod runs it (no model key in its environment): /readyz names "listening" and "nats"
    and is 200 while connected; a task for a provider whose key only the workers hold is submitted,
    not refused; with NATS SIGKILLed /readyz turns 503 on "nats" while /healthz stays 200. Without
    a remote bus the flag is a usage error."""
    from tests.codeloop.test_tasks_server_http import call, http_client

    token = "tasks-token-0123456789abcdef"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{token} client read,write,execute\n")
    tokens.chmod(0o600)
    port = free_loopback_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in codeloop_env(tmp_path / "tasks-home").items() if not k.endswith("_API_KEY")}
    root = repo  # the server's root is the repository itself, named "." by the client
    with anyio.fail_after(120):
        async with open_nats_server(tmp_path / "nats") as nats:
            # The orchestrator makes the streams and takes the task, as its own pod does.
            serve_args = ("--nats", nats.url, "--role", "orchestrator", "--no-mcp", "--no-metrics")
            async with running_serve(tmp_path / "home", *serve_args):
                command = [*CODELOOP, "mcp", "tasks", "--root", str(root), "--scopes", "read,write,execute"]
                process = await anyio.open_process(
                    [
                        *command,
                        "--nats",
                        nats.url,
                        "--worker-credentials",
                        "--transport",
                        "http",
                        "--port",
                        "0",
                        "--token-file",
                        str(tokens),
                        "--health-port",
                        str(port),
                    ],
                    env=env,
                )
                try:
                    assert process.stdout is not None
                    url = (await process.stdout.receive()).decode().strip().splitlines()[0]
                    assert url.endswith("/mcp")
                    assert await _until(f"{base}/readyz", 200) == {
                        "status": "ready",
                        "checks": {"listening": True, "nats": True},
                    }
                    async with http_client(url, token) as client:
                        view = await call(
                            client,
                            "submit_task",
                            task="explain the module",
                            repo=".",
                            mode="read",
                            model="anthropic:claude-sonnet-4-5",
                        )
                        assert view["task_id"]
                    nats.process.send_signal(signal.SIGKILL)
                    assert await _until(f"{base}/readyz", 503) == {
                        "status": "not ready",
                        "checks": {"listening": True, "nats": False},
                    }
                    assert await _get(f"{base}/healthz") == (200, {"status": "ok"})
                    assert process.returncode is None
                finally:
                    await stop_process(process)
                    await process.aclose()

    alone = await anyio.run_process(
        [*CODELOOP, "mcp", "tasks", "--root", str(root), "--worker-credentials"], env=env, check=False
    )
    assert alone.returncode == 2
    assert b"--worker-credentials needs a remote bus" in alone.stderr
