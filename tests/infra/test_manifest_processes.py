"""The manifests' command lines run for real: each role's container command, as the rendered
overlay has it, started against a real three-node JetStream cluster with only the cluster's
addresses and free local ports put in, answers the probes the manifest points at and leaves the
streams at three replicas; the tasks server's and the workspace service's lines get ready on that
cluster too."""

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from bus.config import BusConfig
from bus.connection import open_bus
from bus.server import free_loopback_port, open_nats_cluster
from bus.subjects import EVENTS_STREAM, TASKS_STREAM, WORK_STREAM
from infra.checks import manifests
from infra.checks.kustomize import build
from tests.codeloop.serve_support import CODELOOP, codeloop_env
from tests.infra.conftest import ROOT
from tests.processes import stop_process

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ROLES = ("orchestrator", "verifier")
"""The orchestrator (it alone needs no other role to be ready) and a role under gVisor whose
manifest pins the process sandbox; the others' lines differ only in the role's name."""


def _local(container: dict[str, Any], nats_urls: str, health: int, **more: str) -> list[str]:
    """The container's args with the cluster's URLs, free loopback ports and local paths in place of
    the pod's (`more`: `--metrics-port` as `metrics_port`, ...); every flag replaced must be there."""
    replace = {
        "--nats": nats_urls,
        "--health-port": str(health),
        "--health-host": "127.0.0.1",
        **{f"--{k.replace('_', '-')}": v for k, v in more.items()},
    }
    args = list(container["args"])
    for flag, value in replace.items():
        args[args.index(flag) + 1] = value
    return args


async def _ready(url: str) -> dict[str, object]:
    async with httpx2.AsyncClient(timeout=5) as http:
        with anyio.fail_after(90):
            while True:
                try:
                    response = await http.get(url)
                    if response.status_code == 200:
                        return response.json()
                except httpx2.TransportError:
                    pass  # not listening yet
                await anyio.sleep(0.3)


async def test_the_role_containers_start_get_ready_and_make_the_streams_three_way(tmp_path: Path) -> None:
    deployments = {
        r.name: r.doc
        for r in build(ROOT / manifests.K8S_ROOT / "overlays" / "production")
        if r.kind == "Deployment"
    }
    with anyio.fail_after(240):
        async with open_nats_cluster(tmp_path / "cluster") as nodes:
            urls = ",".join(n.url for n in nodes)
            processes = []
            try:
                for role in ROLES:
                    (container,) = deployments[f"codeloop-{role}"]["spec"]["template"]["spec"]["containers"]
                    health = free_loopback_port()
                    env = codeloop_env(tmp_path / role)
                    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
                    ports = {"metrics_port": str(free_loopback_port()), "metrics_host": "127.0.0.1"}
                    argv = _local(container, urls, health, **ports)
                    processes.append((role, health, await anyio.open_process([*CODELOOP, *argv], env=env)))
                for role, health, process in processes:
                    body = await _ready(f"http://127.0.0.1:{health}/readyz")
                    assert body == {"status": "ready", "checks": {"nats": True, "actors": True}}, role
                    assert process.returncode is None
                # The tasks server's line, once the orchestrator has made the streams and buckets,
                # with the token Secret and the repos volume as local files.
                (container,) = deployments["codeloop-tasks"]["spec"]["template"]["spec"]["containers"]
                repos, tokens = tmp_path / "repos", tmp_path / "tokens"
                repos.mkdir()
                tokens.write_text("k8s-client-token-0123456789abcdef client read\n")
                tokens.chmod(0o440)
                health = free_loopback_port()
                argv = _local(
                    container,
                    urls,
                    health,
                    root=str(repos),
                    token_file=str(tokens),
                    host="127.0.0.1",
                    port=str(free_loopback_port()),
                )
                env = {
                    k: v for k, v in codeloop_env(tmp_path / "tasks").items() if not k.endswith("_API_KEY")
                }
                process = await anyio.open_process([*CODELOOP, *argv], env=env)
                processes.append(("tasks", health, process))
                body = await _ready(f"http://127.0.0.1:{health}/readyz")
                assert body == {"status": "ready", "checks": {"listening": True, "nats": True}}
                assert process.returncode is None
                # The workspace service's line, its listener on a free loopback port and the URL it
                # hands out pointing there; a planted model key must not stop it getting ready.
                (container,) = deployments["codeloop-workspaces"]["spec"]["template"]["spec"]["containers"]
                health, listen = free_loopback_port(), free_loopback_port()
                env = codeloop_env(tmp_path / "workspaces")
                env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
                env["OPENAI_API_KEY"] = "sk-planted-in-the-workspace-pod"
                argv = _local(
                    container,
                    urls,
                    health,
                    workspace_host="127.0.0.1",
                    workspace_port=str(listen),
                    workspace_url=f"http://127.0.0.1:{listen}",
                    metrics_port=str(free_loopback_port()),
                    metrics_host="127.0.0.1",
                )
                process = await anyio.open_process([*CODELOOP, *argv], env=env)
                processes.append(("workspaces", health, process))
                body = await _ready(f"http://127.0.0.1:{health}/readyz")
                assert body == {"status": "ready", "checks": {"nats": True, "actors": True}}
                assert process.returncode is None
                # Ready means it re-executed itself without the key: gone from its environment.
                assert b"sk-planted" not in await anyio.Path(f"/proc/{process.pid}/environ").read_bytes()
                async with open_bus(
                    BusConfig(servers=tuple(n.url for n in nodes), state_dir=tmp_path / "c")
                ) as bus:
                    for stream in (TASKS_STREAM, WORK_STREAM, EVENTS_STREAM):
                        info = await bus.js.stream_info(stream)
                        assert info.config.num_replicas == 3, stream
                        assert len(info.cluster.replicas or []) == 2, stream  # a leader and two followers  # pyright: ignore[reportOptionalMemberAccess] - a cluster's stream always reports its cluster
            finally:
                with anyio.CancelScope(shield=True):
                    for _, _, process in processes:
                        await stop_process(process)
                        await process.aclose()
