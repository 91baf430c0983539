"""The tasks server's `verify_patch`: an MCP client (another agent) asks codeloop to judge a patch.

The server checks the call (the grant, a blank task or patch, the repository confined to the
root) and hands a `PatchCheck` to the `PatchVerifier` it was built with; the verifier (codeloop's
composition root: `codeloop.wiring.judge`) copies the repository's working tree and judges the
patch there as it judges its own coder's patch, so the server still writes nothing under its root.

Its scope is `execute`, unlike the other tools' `read`: judging a patch runs the repository's
tests in the sandbox, whatever the task's mode, so a grant without `execute` does not list it.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from tool_servers.confinement import Root
from tool_servers.protocol.errors import InvalidArguments, NotFound
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.sdk import current_request
from tool_servers.protocol.spec import CallContext, ToolSpec
from tool_servers.tasks.views import MAX_TASK_TEXT_CHARS

MAX_PATCH_CHARS = 8 * 1024 * 1024
DEFAULT_VERIFY_TIMEOUT_S = 1800.0
PROGRESS_EVERY_S = 10.0


class VerifyPatchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    task: str = Field(min_length=1, max_length=MAX_TASK_TEXT_CHARS)
    """What the patch is meant to do, in words (an issue's text): the tests it names are targets,
    its example may show the problem."""
    patch: str = Field(min_length=1, max_length=MAX_PATCH_CHARS)
    """A unified diff against the repository's working tree, as `git diff` writes it."""
    repo: str = "."
    """The repository, relative to the server's root (the root itself by default); only read."""
    mode: Literal["write", "execute"] = "execute"
    """The task's mode, as for submit_task: the diff review's scope rules follow it."""
    timeout_s: float = Field(default=DEFAULT_VERIFY_TIMEOUT_S, gt=0, le=4 * 3600)
    """How long the whole verification may take."""


class VerificationCheck(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    ok: bool
    summary: str


class VerificationFailure(BaseModel):
    model_config = ConfigDict(extra="allow")

    failure_class: str
    test_id: str | None = None
    path: str | None = None
    line: int | None = None
    message: str


class PatchVerification(BaseModel):
    """The verification report, as `codeloop verify --json` prints it: the `verification` object
    of a task's result, and what its verdict rests on."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    verdict: Literal["passed", "failed", "unverified"]
    """`passed`: the task's problem was shown fixed (`evidence`) and nothing is wrong; `failed`:
    `failures` says what; `unverified`: nothing showed the problem fixed, or nothing could run."""
    summary: str = ""
    """One line: the verdict and its main reason."""
    evidence_kind: str = "none"
    """What a `passed` rests on: `flip`, `reproduction`, `example`; `none` otherwise."""
    evidence: list[str] = []
    """The tests that failed before the patch and pass with it."""
    checks: list[VerificationCheck] = []
    failures: list[VerificationFailure] = []


@dataclass(frozen=True)
class PatchCheck:
    """A checked `verify_patch` call, as the server hands it to the verifier."""

    principal: str
    repo: Path
    """Absolute, inside the server's root."""
    task: str
    patch: str
    mode: Literal["write", "execute"]
    timeout_s: float


PatchVerifier = Callable[[PatchCheck], Awaitable[dict[str, Any]]]
"""Judges the patch; returns the report as JSON data (`PatchVerification`'s fields and more).
Raises a tool error (`tool_servers.protocol.errors`) for what the caller must change."""


def verify_patch_tool(root: Root, verifier: PatchVerifier) -> ToolSpec:
    """The `verify_patch` tool over `verifier`, for repositories under `root`."""

    async def handle(args: VerifyPatchArgs, call: CallContext) -> PatchVerification:
        if not args.task.strip():
            raise InvalidArguments("task is blank: say what the patch is meant to do", field="task")
        if not args.patch.strip():
            raise InvalidArguments("patch is blank: nothing to verify", field="patch")
        repo = root.resolve(args.repo)
        if not repo.is_dir():
            raise NotFound(f"repo {args.repo!r} is not a directory under the server's root", repo=args.repo)
        check = PatchCheck(
            principal=call.principal,
            repo=repo,
            task=args.task,
            patch=args.patch,
            mode=args.mode,
            timeout_s=args.timeout_s,
        )
        request = current_request()
        await request.report_progress(0, None, f"judging the patch on a copy of {args.repo}")
        async with anyio.create_task_group() as tg:

            async def heartbeat() -> None:
                # Keeps a client's own request timeout from expiring on a long suite.
                started, beats = anyio.current_time(), 0
                while True:
                    await anyio.sleep(PROGRESS_EVERY_S)
                    beats += 1
                    elapsed = anyio.current_time() - started
                    await request.report_progress(beats, None, f"still judging the patch ({elapsed:.0f} s)")

            tg.start_soon(heartbeat)
            data = await verifier(check)
            tg.cancel_scope.cancel()
        return PatchVerification.model_validate(data)

    return ToolSpec(
        name="verify_patch",
        description="Judge a unified diff against a repository under the root, as codeloop judges its "
        "own coder's patch: its tests run in the sandbox on a copy of the working tree (never "
        "changed). Returns the verification report: verdict passed (the task's problem shown fixed), "
        "failed (failures say what) or unverified (nothing showed it fixed), with checks and evidence. "
        "Takes minutes on a large suite; sends progress notifications when the request has a progress token.",
        scope=Scope.EXECUTE,
        input_model=VerifyPatchArgs,
        output_model=PatchVerification,
        handler=handle,
        idempotent=True,
        uses_request=True,
    )


__all__ = ["PatchCheck", "PatchVerification", "PatchVerifier", "verify_patch_tool"]
