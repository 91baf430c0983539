"""The verifier's actor: a `VerifyRequest` in, a `VerifyResult` out, on a scratch copy of the start.

Three cases, by what the request carries: a patch (`verify_patch`, the baseline computed once and
handed back for the record), an answer in read mode (`verify_answer`: what it cites must exist),
or neither — diagnose mode, where the unmodified tree's test suite is run and its failures are
the report (the tree is judged, nothing is blamed).
"""

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents.messages import VerifyRequest, VerifyResult
from agents.messages.verification import Check, Failure, VerificationReport
from agents.roles.verifier.example import TaskExample
from agents.roles.verifier.exec_session import EXEC_SCOPES, ExecSession, ExecUnavailable, open_exec_session
from agents.roles.verifier.spares import VERIFIER_SPARES
from agents.roles.verifier.verify import PatchTask, verify_answer, verify_patch
from agents.runtime.role import (
    RoleDeps,
    StepError,
    innermost_exception,
)
from agents.runtime.tools import HttpTarget, ToolProvider, ToolTarget
from agents.workspace import workspace_patch
from agents.workspace.providers import WORKSPACES, Workspaces
from agents.workspace.start import materialize_start, scratch_workspace

ROLE = "verifier"
DIAGNOSE_SUITE_CAP_S = 600.0


async def verify(deps: RoleDeps, task_id: str, request: VerifyRequest) -> VerifyResult:
    task = request.task
    workspaces, spares = deps.get(WORKSPACES), deps.get(VERIFIER_SPARES)
    if workspaces is not None and getattr(workspaces, "remote", False) and request.answer is None:
        return await _verify_remotely(deps, workspaces, task_id, request)
    if request.patch is not None and request.answer is None and spares is not None:
        async with spares.take() as spare:
            if spare is not None:
                await materialize_start(deps, task, spare.root)
                return await _verify_patch(deps, request, spare.root, spare.session)
    async with scratch_workspace(deps, task_id, task, "verify") as root:
        if request.answer is not None:
            report = await verify_answer(workspace=root, answer=request.answer)
            return VerifyResult(step_id=request.step_id, report=report, baseline=request.baseline)
        if request.patch is None:
            report = await diagnose_tree(deps, root, request)
            return VerifyResult(step_id=request.step_id, report=report, baseline=request.baseline)
        return await _verify_patch(deps, request, root, None)


async def _verify_remotely(
    deps: RoleDeps, workspaces: Workspaces, task_id: str, request: VerifyRequest
) -> VerifyResult:
    """Everything that executes (tests, static checks, the task's example) runs in a workspace of
    the workspace service; this process keeps its own copy only to read, review and select, and
    mirrors its tree there before each run (`MirroredTools`)."""
    scopes = EXEC_SCOPES
    async with scratch_workspace(deps, task_id, request.task, "verify") as root:
        async with workspaces.open(deps, task_id, request.task, "verify", scopes) as remote:
            tools = MirroredTools(remote, root)
            if request.patch is None:
                report = await diagnose_tree(deps, root, request, tools=tools)
                return VerifyResult(step_id=request.step_id, report=report, baseline=request.baseline)
            return await _verify_patch(deps, request, root, None, tools=tools)


class MirroredTools:
    """A `ToolProvider` whose servers are a remote workspace's, brought to the tree of the local
    copy `root` before each exec or example call (the verifier restores and re-applies the patch
    between runs, so the remote tree follows every change of the local one)."""

    def __init__(self, remote: Any, root: Path) -> None:
        self.remote = remote
        self.root = root
        self._synced = ""  # a new workspace is the snapshot: no patch

    async def _sync(self) -> None:
        diff = (await workspace_patch(self.root)).diff
        if diff != self._synced:
            await self.remote.sync(diff)
            self._synced = diff

    def servers(
        self, root: Path, scopes: frozenset[str], *, index_dir: Path | None = None
    ) -> dict[str, ToolTarget]:
        return {
            name: HttpTarget(target.url, target.token, before_call=self._sync)
            if isinstance(target, HttpTarget)
            else target
            for name, target in self.remote.servers.items()
        }


async def _verify_patch(
    deps: RoleDeps,
    request: VerifyRequest,
    root: Path,
    session: ExecSession | None,
    *,
    tools: ToolProvider | None = None,
) -> VerifyResult:
    assert request.patch is not None
    example = TaskExample(text=request.task.text) if request.task.mode == "execute" else None
    task = PatchTask(
        mode=request.task.mode,
        plan_files=request.plan.files_of_interest,
        test_targets=request.plan.test_targets,
        text=request.task.text,
        example=example,
        approved_paths=tuple(request.approved_paths),
    )
    report, baseline = await verify_patch(
        workspace=root,
        patch=request.patch,
        task=task,
        tools=tools or deps.tools,
        deadline=request.deadline_at,
        baseline=request.baseline,
        session=session,
        cache_dir=deps.coverage_dir,
    )
    return VerifyResult(step_id=request.step_id, report=report, baseline=baseline)


async def diagnose_tree(
    deps: RoleDeps, root: Path, request: VerifyRequest, *, tools: ToolProvider | None = None
) -> VerificationReport:
    """The unmodified tree's test suite as a report: which tests fail, where."""
    left = (request.deadline_at - datetime.now(UTC)).total_seconds()
    if left <= 1:
        raise StepError("budget.wall", "the deadline passed before the tests could run")
    target = (tools or deps.tools).servers(root, EXEC_SCOPES)["exec"]
    try:
        async with open_exec_session(target) as session:
            run = await session.run_tests([], timeout_s=min(left - 1, DIAGNOSE_SUITE_CAP_S))
    except ExecUnavailable as exc:
        raise StepError("env.infra", str(exc)) from exc
    except BaseExceptionGroup as group:  # the MCP session wraps what failed inside it
        leaf = innermost_exception(group)
        if isinstance(leaf, ExecUnavailable):
            raise StepError("env.infra", str(leaf)) from group
        raise
    summary = f"{run.passed} passed, {run.failed} failed, {run.errors} errors, {run.skipped} skipped"
    environment = run.environment.model_dump() if run.environment is not None else None
    checks = [Check(name="tests", ok=not run.failures and run.setup_error is None, summary=summary)]
    if run.environment is not None:
        checks.insert(0, Check(name="environment", ok=True, summary=run.environment.describe()))
    if run.setup_error is not None:
        # The suite could not run: say why (the build's failing step, the module and file that
        # cannot be imported), never "no tests were collected".
        problem = run.setup_error
        failure = Failure(
            failure_class=problem.failure_class  # pyright: ignore[reportArgumentType] - pydantic turns the value into its FailureClass member
            if problem.failure_class in ("env.setup", "test.collection_error")
            else "env.setup",
            path=problem.file,
            message=problem.message,
            stack_summary=run.output_tail,
        )
        checks[-1] = Check(name="tests", ok=False, summary=f"could not run: {problem.message}")
        return VerificationReport(
            verdict="unverified",
            checks=checks,
            failures=[failure],
            environment=environment,  # pyright: ignore[reportArgumentType] - pydantic validates the dict into EnvironmentUse
        )
    if run.timed_out:
        failure = Failure(failure_class="test.timeout", message=f"the test suite did not finish: {summary}")  # pyright: ignore[reportArgumentType] - pydantic turns the value into its FailureClass member
        return VerificationReport(
            verdict="failed", checks=[Check(name="tests", ok=False, summary=summary)], failures=[failure]
        )
    if run.total == 0:
        return VerificationReport(
            verdict="unverified",
            checks=[Check(name="tests", ok=False, summary="no tests were collected")],
            failures=[Failure(failure_class="verify.unverifiable", message="no tests were collected")],  # pyright: ignore[reportArgumentType] - pydantic turns the value into its FailureClass member
        )
    failures = [
        Failure(
            failure_class=f.failure_class or "test.still_failing",  # pyright: ignore[reportArgumentType] - pydantic turns the value into its FailureClass member
            test_id=f.test_id,
            path=f.file or f.test_id.split("::")[0],
            line=f.line or None,
            message=f.message or f.outcome,
            stack_summary=f.traceback,
        )
        for f in run.failures
    ]
    return VerificationReport(
        verdict="failed" if failures else "passed",
        checks=checks,
        failures=failures,
        environment=environment,  # pyright: ignore[reportArgumentType] - pydantic validates the dict into EnvironmentUse
    )
