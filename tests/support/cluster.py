"""The cluster on one machine: a 3-node JetStream cluster, an orchestrator and W workers per role,
each a separate `codeloop serve` process with its own CODELOOP_HOME, none able to read the
submitter's repository.

Used by `benchmarks/scale_bench.py` and `tests/scale/`. The workers run as another user (uid
`RUN_AS`, "nobody") when this process is root, so the repository (mode 0700, owned by the
submitter) is unreadable to them and the snapshot in the object store is all they have. The
sandbox backend is `process` for them: `runsc` needs root. The 3 nodes are the cluster that
`infra/nats/n{1,2,3}.conf` describes, started by `bus.server.open_nats_cluster` on free loopback
ports (the checked-in files name fixed ports, which another cluster on the machine may hold).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process

from bus.server import NatsServer, open_nats_cluster

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ROOT / "examples" / "models" / "scripted.py"
ROLES = ("planner", "retriever", "coder", "verifier")
RUN_AS = 65534
"""The workers' uid and gid when this process is root: nobody, who cannot read a 0700 repository."""


def slow_model() -> str:
    """The scripted model that sleeps CODELOOP_SCRIPTED_DELAY_S before each decision, then fixes."""
    return f"function:{SCRIPTED}:slow"


def as_other_user() -> list[str]:
    """The command prefix that drops to `RUN_AS` (empty when not root: the workers run as us)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--clear-groups", "--"]


def worker_python(base: Path) -> str:
    """The interpreter the workers run. When they are another user, ours may sit where that user
    cannot reach (a pyenv under /root, mode 0700): then a venv of the system's Python 3.11 under
    `base` that sees our site-packages, so the workers and the commands their sandboxes start
    (`sys.executable`) run the same code as we do."""
    if not as_other_user():
        return sys.executable
    venv = base / "venv"
    if not venv.exists():
        system = shutil.which("python3.11", path="/usr/local/bin:/usr/bin:/bin")
        if system is None:
            raise RuntimeError(
                "the workers need a Python 3.11 another user can run: none in /usr/local/bin, /usr/bin"
            )
        subprocess.run([system, "-m", "venv", "--without-pip", str(venv)], check=True)
        ours = next(
            p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_relative_to(sys.prefix)
        )
        (venv / "lib" / "python3.11" / "site-packages" / "codeloop-ours.pth").write_text(
            f"import site; site.addsitedir({str(ours)!r})\n"
        )
    return str(venv / "bin" / "python")


def _owned(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, RUN_AS, RUN_AS)
    return path


@dataclass
class Worker:
    role: str
    slot: int
    home: Path
    process: Process


@dataclass
class Cluster:
    base: Path
    nodes: list[NatsServer]
    model_delay_s: float
    ack_wait_s: float
    cache_dir: Path
    python: str
    workers: list[Worker] = field(default_factory=list)
    started: int = 0
    workspaces: bool = False
    """With a workspace service: the coder and verifier work only through it (`--workspace-service`)."""
    concurrency: int | None = None
    """Requests each worker handles at once (`serve --concurrency`); None: the default, 64."""

    urls: str = ""
    """The nodes' client URLs, as they were at start: a restarted node keeps its port."""

    def env(self, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CODELOOP_", "XDG_"))}
        return {
            **env,
            "HOME": str(home),
            "CODELOOP_HOME": str(home),
            # One embedding cache for every worker, as the image bakes one into each pod: the
            # model is converted once, not once per process.
            "CODELOOP_CACHE_DIR": str(self.cache_dir),
            "CODELOOP_SANDBOX": "process",
            "CODELOOP_SCRIPTED_DELAY_S": str(self.model_delay_s),
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    async def start(self, role: str, slot: int | None = None) -> Worker:
        """A `codeloop serve --role ROLE` worker on the cluster, its own home, ready (role
        `workspaces`: the workspace service, `serve --workspaces`)."""
        slot = self.started if slot is None else slot
        self.started += 1
        home = _owned(self.base / "homes" / f"{role}-{slot}-{self.started}")
        if role == "workspaces":
            what = ["--workspaces"]
        else:
            remote = self.workspaces and role in ("coder", "verifier")
            what = [
                "--role",
                role,
                "--ack-wait",
                f"{self.ack_wait_s:g}",
                *(["--workspace-service"] if remote else []),
            ]
            if self.concurrency is not None and role != "orchestrator":
                what += ["--concurrency", str(self.concurrency)]
        command = [
            *as_other_user(),
            self.python,
            "-m",
            "codeloop",
            "serve",
            "--json",
            "--no-mcp",
            "--nats",
            self.urls,
            "--replicas",
            "3",
            *what,
            "--state-dir",
            str(home),
        ]
        log = (self.base / "logs" / f"{home.name}.log").open("ab")
        with log:
            process = await anyio.open_process(command, env=self.env(home), cwd=home, stderr=log)
        try:
            await _ready(process)
        except BaseException:
            await _stop(process)
            raise
        worker = Worker(role, slot, home, process)
        self.workers.append(worker)
        return worker

    def live(self, role: str) -> list[Worker]:
        return [w for w in self.workers if w.role == role and w.process.returncode is None]

    async def kill(self, worker: Worker) -> None:
        """SIGKILL, as a crash: no drain, its unacknowledged message is redelivered after the ack wait."""
        worker.process.send_signal(signal.SIGKILL)
        await worker.process.wait()

    async def stop_all(self) -> None:
        for worker in self.workers:
            await _stop(worker.process)

    async def scale(self, per_role: int) -> None:
        """Exactly `per_role` live workers of each role (starting or stopping the newest)."""
        for role in ROLES:
            live = self.live(role)
            for worker in live[per_role:]:
                await _stop(worker.process)
            for _ in range(per_role - len(live)):
                await self.start(role)


async def _ready(process: Process) -> dict:
    assert process.stdout is not None
    buffer = b""
    with anyio.fail_after(120):
        while b"\n" not in buffer:
            buffer += await process.stdout.receive()
    return json.loads(buffer.split(b"\n", 1)[0])


async def _stop(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(20):
                await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


def _seed_cache(cache: Path) -> None:
    """Seed the workers' cache with the embedder's converted model only (its `openvino/`), as the
    image bakes it into each pod; nothing else of this process's cache (environments, repository
    mirrors, indexes) is copied. Without one, the first worker converts it into the shared cache."""
    # Here, not at the top: the embedder's module imports numpy (about 1 s), which collecting the
    # tests that import this module should not pay.
    from tool_servers.search.embedding.embed import OPENVINO_DIR
    from tool_servers.search.embedding.embed_cache import default_cache_root

    source = Path(os.environ.get("CODELOOP_CACHE_DIR") or default_cache_root()) / OPENVINO_DIR
    if not source.is_dir() or any(cache.iterdir()):
        return
    # symlinks=True: a link is copied as a link, never followed (a loop or a link out of the cache).
    shutil.copytree(source, cache / OPENVINO_DIR, symlinks=True)
    if os.geteuid() == 0:
        for path in [cache, *cache.rglob("*")]:
            os.chown(path, RUN_AS, RUN_AS, follow_symlinks=False)


@asynccontextmanager
async def open_cluster(
    base: Path,
    *,
    model_delay_s: float = 0.3,
    ack_wait_s: float = 30.0,
    workspaces: bool = False,
    concurrency: int | None = None,
) -> AsyncIterator[Cluster]:
    """The 3 NATS nodes and the orchestrator (also another user, its own home), and with
    `workspaces` the workspace service; workers via `start`."""
    (base / "logs").mkdir(parents=True, exist_ok=True)
    _owned(base)
    _owned(base / "homes")
    cache = _owned(base / "cache")
    await anyio.to_thread.run_sync(_seed_cache, cache)
    python = await anyio.to_thread.run_sync(worker_python, base)
    async with open_nats_cluster(base / "nats") as nodes:
        cluster = Cluster(
            base,
            nodes,
            model_delay_s,
            ack_wait_s,
            cache,
            python,
            workspaces=workspaces,
            concurrency=concurrency,
        )
        cluster.urls = ",".join(node.url for node in nodes)
        try:
            await cluster.start("orchestrator")
            if workspaces:
                await cluster.start("workspaces")
            yield cluster
        finally:
            await cluster.stop_all()
