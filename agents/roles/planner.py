"""The planner (LLM): a structured `Plan` from the task and a first cheap look at the repository.

The look is the `search` server's repository map and one search for the task text, read-only on a
scratch copy; the model answers in one structured output (`Plan`), without tools, so planning
costs one request. On revision the request carries the previous plan and the verifier's
feedback, and the new plan records why it replaces the old one; a task continuing an ended one
revises that task's plan, told what it did and what is asked now. Without a model (diagnose mode)
the plan is fixed: find the relevant code, run the tests, report.
"""

from pydantic_ai import Agent
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.usage import RunUsage, UsageLimits

from agents.budgets import budget_used_up
from agents.errors import CostBudgetExceeded, ModelMisbehaved
from agents.instructions import project_instructions
from agents.messages import Plan, PlanRequest, PlanResult, PlanStep, TaskSubmitted
from agents.models.adapter import model_errors_as_agent_errors
from agents.runtime.metering import budget_stop_message, model_for, run_timeout_s, usage_of
from agents.runtime.role import (
    RoleDeps,
    RunInfo,
    StepError,
    index_dir_for,
    observer_capabilities,
)
from agents.runtime.tools import mcp_client
from agents.workspace.start import scratch_workspace

ROLE = "planner"
LOOK_BUDGET = 1500
"""Tokens of repository map the planner's prompt gets."""

INSTRUCTIONS = """\
You are the planner of a coding agent. Given a task and a first look at a repository, produce a
short plan: concrete steps, hypotheses about the cause to check, the files of interest
(repository-relative paths that exist in the map), the test files or node ids that should show the
task is done, and the done criteria. Do not write code. If a previous plan failed, say in
revision_reason why the new plan differs."""


def fixed_plan(task: TaskSubmitted, files: list[str]) -> Plan:
    """The plan diagnose mode follows when no model is configured."""
    return Plan(
        steps=[
            PlanStep(description="Find the code the task is about", files=files[:5]),
            PlanStep(description="Run the tests on the unmodified tree and report what fails"),
            PlanStep(description="Report what a model would be asked to change"),
        ],
        files_of_interest=files[:5],
        done_criteria=["the diagnosis names the relevant files and the failing tests"],
        fixed=True,
    )


async def _look(deps: RoleDeps, task_id: str, task: TaskSubmitted) -> tuple[str, list[str]]:
    async with scratch_workspace(deps, task_id, task, "plan") as root:
        target = deps.tools.servers(root, frozenset({"read"}), index_dir=index_dir_for(deps, task))["search"]
        async with mcp_client(target) as search:
            mapped = await search.call_tool("repo_map", {"token_budget": LOOK_BUDGET})
            found = await search.call_tool(
                "search_code", {"query": task.text[:20_000], "k": 8, "per_file": True}
            )
    repo_map = "" if mapped.is_error else (mapped.structured_content or {}).get("text", "")
    hits = [] if found.is_error else (found.structured_content or {}).get("hits", [])
    return repo_map, [h["path"] for h in hits]


async def plan(
    deps: RoleDeps, task_id: str, request: PlanRequest, *, trace_id: str | None = None
) -> PlanResult:
    task = request.task
    repo_map, files = await _look(deps, task_id, task)
    name = task.models.for_role(ROLE)
    if not name:
        return PlanResult(step_id=request.step_id, plan=fixed_plan(task, files))
    model = model_for(deps, task.models.chain_for(ROLE), role=ROLE, task_id=task_id, budget=request.budget)  # pyright: ignore[reportArgumentType] - for_role(ROLE) named a model above, so chain_for(ROLE) is not None
    run_info = RunInfo(task_id=task_id, role=ROLE, step_id=request.step_id, trace_id=trace_id)
    agent = Agent(
        model,
        output_type=Plan,
        instructions=INSTRUCTIONS,
        retries=2,
        name=ROLE,
        capabilities=observer_capabilities(deps, run_info),
    )
    instructions = await project_instructions(deps.bus, task, files_in_play=files)
    prompt = _prompt(task, repo_map, files, request, instructions.text)
    limits = UsageLimits(
        request_limit=max(1, request.budget.requests), total_tokens_limit=max(1, request.budget.tokens)
    )
    used = RunUsage()  # filled as the run goes, so a budget stop still charges what it used
    try:
        with model_errors_as_agent_errors(model=name):
            result = await agent.run(
                prompt, usage_limits=limits, usage=used, timeout=run_timeout_s(request.budget)
            )
    except UsageLimitExceeded as exc:
        stopped_by = "budget.tokens" if "token" in str(exc) else "budget.steps"
        raise StepError(stopped_by, budget_stop_message(stopped_by, task, request.budget, used)) from exc
    except CostBudgetExceeded as exc:
        raise StepError("budget.cost", str(exc), usage=usage_of(used, model)) from exc
    except ModelMisbehaved as exc:
        # No plan after the retries (prose, an empty answer, a plan that never validated): the
        # step fails with the model's class, charged with the requests it made.
        raise StepError(exc.failure_class, str(exc), usage=usage_of(used, model)) from exc
    except TimeoutError as exc:
        raise StepError(
            "budget.wall", budget_used_up("budget.wall", task.budgets, during="while planning")
        ) from exc
    new_plan = result.output
    if request.previous is not None and not new_plan.revision_reason:
        continuation = task.continuation if request.feedback is None else None
        reason = f"continued from task {continuation.parent_task_id}" if continuation else None
        new_plan = new_plan.model_copy(
            update={"revision_reason": reason or request.feedback or "revised after failed attempts"}
        )
    return PlanResult(step_id=request.step_id, plan=new_plan, usage=usage_of(result.usage, model))


def _prompt(
    task: TaskSubmitted, repo_map: str, files: list[str], request: PlanRequest, instructions: str = ""
) -> str:
    parts = [f"## Task ({task.mode} mode)\n{task.text}", f"## Repository map\n{repo_map or '(empty)'}"]
    if instructions:
        parts.append(instructions)
    if files:
        parts.append("## Files a search for the task found\n" + "\n".join(f"- {f}" for f in files))
    if request.previous is not None:
        parts.append("## Previous plan\n" + request.previous.model_dump_json(indent=1))
    if request.feedback:
        parts.append("## Why it failed\n" + request.feedback)
    if task.continuation is not None:
        parts.append("## Continuing an earlier task\n" + task.continuation.brief())
    return "\n\n".join(parts)
