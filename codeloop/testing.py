"""Testing a role: one task through a pipeline on a real bus, with a scripted model.

For role authors (docs/custom-roles.md, "Testing a role"). In a test module or `conftest.py`:

    pytest_plugins = ["codeloop.testing"]

    @pytest.mark.anyio
    async def test_my_reviewer_requests_changes(codeloop_pipeline, tmp_path):
        repo = codeloop_pipeline.make_repo(tmp_path / "repo", {"app.py": "...", "tests/test_app.py": "..."})
        result = await codeloop_pipeline.run(
            "fix the bug", repo, mode="write",
            stages=["plan:planner", "retrieve:retriever", "code:coder", "review:my-reviewer", "verify:verifier"],
            model="function:tests/scripted.py:coder",
        )
        assert [r.verdict for r in result.reviews] == ["request_changes", "approve"]

The fixture runs a `codeloop serve` in the test's process (`codeloop.wiring.embedded.embedded_serve`)
— an embedded nats-server, the orchestrator, the built-in roles and every installed plug-in role
— on a private state directory, and stops it after the test. Nothing is mocked: only the model's decisions are scripted (a
`function:PATH.py:NAME` model file, see `examples/models/scripted.py`).
"""

import inspect
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio

from agents.client import submit_task, watch_task
from agents.messages import Budgets, ModelNames, PipelineChoice, TaskResult, TaskSubmitted
from agents.orchestrator.pipeline import parse_pipeline
from agents.runtime.plugins import RoleRegistry, load_roles
from bus.actor import DeliveryPolicy
from bus.config import BusConfig
from bus.connection import Bus, open_bus
from codeloop.config.settings import Settings
from codeloop.config.task_builder import make_task
from codeloop.snapshots import capture_repository
from codeloop.wiring.embedded import embedded_serve
from codeloop.wiring.process import Hosting, RoleSetup, Workers
from codeloop.wiring.roles import every_role, plugin_roles

T = TypeVar("T")


def make_repo(root: Path, files: dict[str, str], *, branch: str | None = None) -> Path:
    """A git repository at `root` with `files` committed (what a task starts from); `branch`
    names its first branch (default: git's own choice). The committer identity is set in the
    repository, so a test can commit there again."""
    root.mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(["git", "init", "-q", *(["-b", branch] if branch else [])], cwd=root, check=True)
    subprocess.run(["git", "config", "user.email", "t@example.com"], cwd=root, check=True)
    subprocess.run(["git", "config", "user.name", "t"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=root, check=True)
    return root


async def eventually(
    check: Callable[[], Awaitable[T | None] | T | None], *, timeout_s: float = 30.0, interval_s: float = 0.05
) -> T:
    """Poll `check` until it returns something other than None (or False); return that.

    For what another process or task brings about in its own time: a test waits for the state it
    expects with a deadline instead of sleeping a fixed time. Raises `TimeoutError` (the last value
    in its message) when `timeout_s` passes first."""
    last: object = None
    with anyio.move_on_after(timeout_s):
        while True:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            last = value
            if value is not None and value is not False:
                return value  # pyright: ignore[reportReturnType] - a value that is neither None nor False, awaited if it was awaitable: the T of check
            await anyio.sleep(interval_s)
    raise TimeoutError(f"not within {timeout_s} s (last: {last!r})")


@dataclass
class PipelineRunner:
    """A running serve and a client bus to it; `run` submits one task and waits for its result."""

    bus: Bus
    nats_url: str
    auth_env: dict[str, str]
    """The embedded server's generated credentials as environment variables, for `codeloop ...`
    subprocesses of the test (with `--nats nats_url`)."""
    roles: tuple[str, ...]
    results: list[TaskResult] = field(default_factory=list)

    async def run(
        self,
        text: str,
        repo: Path,
        *,
        stages: Sequence[str] | None = None,
        pipeline: str = "test",
        mode: str = "write",
        model: str | None = None,
        budgets: Budgets | None = None,
        timeout_s: float = 300,
    ) -> TaskResult:
        """Submit `text` on `repo` through `stages` (`KIND:ROLE`; default: the standard pipeline
        of `mode`) with `model` for every LLM role, and return the task's result."""
        choice = None
        if stages is not None:
            parse_pipeline(pipeline, stages, mode=mode)  # a bad pipeline fails here, with the reason
            choice = PipelineChoice(name=pipeline, stages=list(stages))
        task = make_task(
            text,
            repo,
            settings=Settings(models=ModelNames(default=model), budgets=budgets or Budgets()),
            mode=mode,  # pyright: ignore[reportArgumentType] - mode is validated by TaskSubmitted, which names the allowed ones
            pipeline=choice,
        )
        return await self.submit(task, timeout_s=timeout_s)

    async def submit(self, task: TaskSubmitted, *, timeout_s: float = 300) -> TaskResult:
        """Submit `task` as it is (its working tree captured unless it has a snapshot) and wait."""
        if task.snapshot is None:
            task = task.model_copy(update={"snapshot": await capture_repository(self.bus, Path(task.repo))})
        envelope, _ = await submit_task(self.bus, task)
        with anyio.fail_after(timeout_s):
            final = await watch_task(self.bus, envelope.task_id, lambda e: None)
        assert final is not None
        result = TaskResult.model_validate(final.payload)
        self.results.append(result)
        return result

    make_repo = staticmethod(make_repo)
    """`make_repo` of this module, at hand on the `codeloop_pipeline` fixture."""


@asynccontextmanager
async def running_pipeline(
    state_dir: Path,
    *,
    roles: Sequence[str] | None = None,
    registry: RoleRegistry | None = None,
    ack_wait_s: float = 10.0,
    policy: DeliveryPolicy | None = None,
    setup: RoleSetup = RoleSetup(),
    hosting: Hosting = Hosting(),
) -> AsyncIterator[PipelineRunner]:
    """A serve in this process on `state_dir` running `roles` (default: the orchestrator, the
    built-ins and every installed plug-in role), and a client to it; `policy` replaces the
    delivery policy of every role (default: the runtime's, with `ack_wait_s`); `setup` and
    `hosting` are the rest of what `codeloop.wiring.process.serve` takes."""
    registry = registry or load_roles()
    chosen = tuple(roles) if roles is not None else every_role(registry)
    workers = Workers(roles=chosen, policy=policy or DeliveryPolicy(ack_wait_s=ack_wait_s), registry=registry)
    async with embedded_serve(
        BusConfig(state_dir=state_dir),
        join=False,
        store="state_dir",
        workers=workers,
        setup=setup,
        hosting=hosting,
    ) as serve:
        client = serve.config
        async with open_bus(client) as bus:
            auth = {
                "CODELOOP_NATS_USER": client.user or "",
                "CODELOOP_NATS_PASSWORD": client.password or "",
            }
            yield PipelineRunner(bus=bus, nats_url=",".join(client.servers), auth_env=auth, roles=chosen)


__all__ = ["PipelineRunner", "eventually", "make_repo", "plugin_roles", "running_pipeline"]

try:
    import pytest
except ImportError:  # pragma: no cover - only tests import this module
    pytest = None

if pytest is not None:

    @pytest.fixture
    def anyio_backend() -> str:
        """nats-py and pydantic-ai run on asyncio only (a project conftest may override this)."""
        return "asyncio"

    @pytest.fixture
    async def codeloop_pipeline(tmp_path: Path) -> AsyncIterator[PipelineRunner]:
        """A running codeloop (every installed role) for this test; see the module docstring."""
        async with running_pipeline(tmp_path / "codeloop-state") as runner:
            yield runner
