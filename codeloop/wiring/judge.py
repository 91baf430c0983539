"""Judging a patch from outside the pipeline: `codeloop verify` and the tasks server's `verify_patch`.

The checkout's working tree (what a task's snapshot would hold: tracked and not-ignored files,
uncommitted changes included) is copied into a scratch directory under the state directory's
`work/` and committed there as the starting tree; the verifier then judges the patch against it
exactly as it judges a coder's patch (`agents.roles.verifier.verify.verify_patch`), with this
process's tool servers. The checkout is only read, never written. The starting tree's coverage
run is kept in the state directory's `coverage/`, as the verifier role keeps it, so judging a
second patch of the same tree skips that run.
"""

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio
from pydantic import JsonValue

from agents.messages.verification import VerificationReport
from agents.runtime.tools import ToolProvider
from agents.workspace import copy_checkout, open_scratch
from layout import COVERAGE_DIR, WORK_DIR

if TYPE_CHECKING:
    from tool_servers.tasks.verify import PatchCheck, PatchVerifier

JudgedMode = Literal["write", "execute"]
DEFAULT_TIMEOUT_S = 1800.0
MAX_FILES = 200_000
MAX_BYTES = 512 * 1024 * 1024
"""The largest checkout copied, as a task's snapshot (`agents.workspace.manifest` defaults)."""


@dataclass(frozen=True)
class PatchToJudge:
    """A patch from anywhere (another agent, a person) and the task it claims to do."""

    repo: Path
    """The checkout the patch is against; only read."""
    task: str
    """The task's text: the tests it names are targets, its example may show the problem."""
    patch: str
    """A unified diff, `git diff` style (a/ b/ prefixes)."""
    mode: JudgedMode = "execute"
    """The task's mode, as for `codeloop run`: the diff review's scope rules follow it."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """The whole verification's deadline, from now."""


async def judge_patch(
    request: PatchToJudge, *, state_dir: Path, tools: ToolProvider | None = None
) -> VerificationReport:
    """The verifier's report on `request.patch` against the checkout at `request.repo`.
    `tools`: the tool servers to verify with (default: in-process servers on this machine's
    sandbox, `CODELOOP_SANDBOX` and `CODELOOP_CACHE_DIR` honoured).

    Raises:
        agents.workspace.WorkspaceError: the checkout cannot be copied (unreadable, too large, a
            file changing meanwhile) or git failed in the copy.
    """
    # Here, not at the top: the verifier pulls in the MCP client, seconds of import the
    # commands that only parse their options should not pay.
    from agents.roles.verifier.verify import PatchTask, verify_patch
    from codeloop.config.environment import tool_server_config
    from codeloop.config.project_environment import dependency_dates
    from codeloop.wiring.tools import InProcessTools

    deadline = datetime.now(UTC) + timedelta(seconds=request.timeout_s)
    work, coverage = _made(state_dir / WORK_DIR), _made(state_dir / COVERAGE_DIR)
    dates = await anyio.to_thread.run_sync(dependency_dates, request.repo)
    async with open_scratch(work, f"verify-{secrets.token_hex(4)}", "judge") as scratch:
        await copy_checkout(
            request.repo, scratch, max_files=MAX_FILES, max_bytes=MAX_BYTES, source_dates=dates
        )
        report, _ = await verify_patch(
            workspace=scratch,
            patch=request.patch,
            task=PatchTask(mode=request.mode, text=request.task),
            tools=tools or InProcessTools(config=tool_server_config()),
            deadline=deadline,
            baseline=None,
            cache_dir=coverage,
        )
    return report


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def patch_verifier(state_dir: Path, *, tools: ToolProvider | None = None) -> "PatchVerifier":
    """The tasks server's `verify_patch` judge: `judge_patch` of each checked call, its report as
    JSON data; a checkout that cannot be copied is the caller's to fix (invalid arguments)."""
    from agents.workspace import CaptureFailed
    from tool_servers.protocol.errors import InvalidArguments

    async def verify(check: "PatchCheck") -> dict[str, JsonValue]:
        request = PatchToJudge(
            repo=check.repo, task=check.task, patch=check.patch, mode=check.mode, timeout_s=check.timeout_s
        )
        try:
            report = await judge_patch(request, state_dir=state_dir, tools=tools)
        except CaptureFailed as exc:
            raise InvalidArguments(f"the repository cannot be copied to judge the patch: {exc}") from None
        return report.model_dump(mode="json")

    return verify
