"""The coder (LLM): a pydantic-ai tool loop over the MCP servers, in a scratch workspace.

The model gets the tools of the `fs`, `search`, `git` (and in execute mode `exec`) servers under
their own names, rooted at a scratch copy of the task's tree and granted what the mode allows
(`agents.runtime.tools.MODE_SCOPES`): read mode reads and answers, write mode may also `write_file` and
`apply_patch`, execute mode may also run commands and tests in the sandbox. The user's own MCP
servers the task carries, where the mode covers their scope, are started for the step and offered
as `NAME__TOOL` (`agents.runtime.user_servers`); the project's instructions (`agents.instructions`)
are part of the prompt. When revising, the workspace starts from the previous patch and the prompt
leads with the verifier's failures; a task continuing an ended one starts from that task's patch,
and its prompt tells what that task did.

The patch is never the model's words: it is the system's diff of the workspace against the
snapshot (`workspace_patch`), taken whether the model finished or a limit stopped it (then it is
the partial patch of the hand-off). Limits bind inside the run: `UsageLimits` for the step's
remaining requests and tokens, the task's deadline as the run's timeout, and hooks that stop the
loop on repeated identical tool calls or too many consecutive tool failures.

What real models emit wrong is answered to the model and counted, never raised past the step:
tool-call arguments that are not JSON, an unknown tool, arguments of the wrong type or missing,
an empty response come back to it as a retry prompt or a tool error (each a request of the
step's budget); once its retries are spent the run ends `agent.format`, a response cut at the
token limit `model.truncated` — handed off like a loop, with the partial patch and the usage.
"""

import json
import re
import warnings

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import Hooks, ValidatedToolArgs, WrapToolExecuteHandler
from pydantic_ai.exceptions import ModelRetry, UsageLimitExceeded
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RunUsage, UsageLimits

from agents.budgets import budget_used_up
from agents.errors import AgentError, CostBudgetExceeded, ModelMisbehaved
from agents.instructions import project_instructions
from agents.messages import Approval, CodeRequest, CodeResult
from agents.models.adapter import model_errors_as_agent_errors
from agents.runtime.confirmations import Answer, ElicitationHandler, elicitation_handler
from agents.runtime.metering import budget_stop_message, model_for, run_timeout_s, usage_of
from agents.runtime.role import (
    RoleDeps,
    RunInfo,
    StepError,
    index_dir_for,
    observer_capabilities,
)
from agents.runtime.tools import MODE_SCOPES, HttpTarget, ToolTarget
from agents.runtime.user_servers import open_user_servers
from agents.workspace.providers import LOCAL, WORKSPACES

ROLE = "coder"
MCP_READ_TIMEOUT_S = 600
"""A tool call (a test run) may take minutes; the exec server enforces its own deadlines."""
MCP_INIT_TIMEOUT_S = 60
"""In-process servers start at once; a stdio server that imports the embedding model does not."""

INSTRUCTIONS = {
    "read": (
        "You are the coder of a coding agent, in read mode: investigate the repository with the tools "
        "and answer the task. Cite the files (repository-relative paths) and line numbers your answer "
        "rests on. Do not propose edits."
    ),
    "write": (
        "You are the coder of a coding agent. Make the change the task asks for in the repository with "
        "the tools (read_file, write_file, apply_patch; paths relative to the repository root). Keep "
        "the change minimal and do not weaken tests. When done, answer with a one-paragraph summary."
    ),
}
INSTRUCTIONS["execute"] = INSTRUCTIONS["write"] + " You may run the tests (run_tests) to check your change."


# pydantic-ai warns that an elicitation handler "will never be called" on modern MCP sessions; the
# servers ask through resolvers, which do reach it there (the confirmation tests show it).
warnings.filterwarnings("ignore", message="`elicitation_handler` will never be called", category=UserWarning)


class LoopDetected(AgentError):
    failure_class = "agent.loop"


class _Guard:
    """Counts tool calls for the hooks: identical calls in a row, consecutive failures."""

    def __init__(self, *, max_repeated: int, max_failures: int) -> None:
        self.max_repeated = max_repeated
        self.max_failures = max_failures
        self.last: str | None = None
        self.repeats = 0
        self.failures = 0
        self.calls = 0
        self.truncated = False
        """The last response was text cut at the token limit."""

    async def before(
        self,
        ctx: RunContext[object],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
    ) -> ValidatedToolArgs:
        self.calls += 1
        key = call.tool_name + json.dumps(
            args if isinstance(args, dict) else str(args), sort_keys=True, default=str
        )
        self.repeats = self.repeats + 1 if key == self.last else 1
        self.last = key
        if self.repeats >= self.max_repeated:
            raise LoopDetected(f"the same {call.tool_name} call {self.repeats} times in a row")
        return args

    async def around(
        self,
        ctx: RunContext[object],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> object:
        # A wrap hook, not an error hook: a tool's error result reaches pydantic-ai as ModelRetry,
        # which passes through the wrap but skips `tool_execute_error` hooks.
        try:
            result = await handler(args)
        except LoopDetected:
            raise
        except Exception as error:
            self.failures += 1
            if self.failures >= self.max_failures:
                raise LoopDetected(
                    f"{self.failures} tool calls failed in a row (last: {call.tool_name}: {error})"[:500]
                ) from error
            raise
        self.failures = 0
        return result

    async def after_response(
        self, ctx: RunContext[object], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        # Text cut at the token limit is no answer: the model is told and asked again (an output
        # retry). A tool call cut there is pydantic-ai's own `IncompleteToolCall`.
        self.truncated = response.finish_reason == "length" and not response.tool_calls
        if self.truncated:
            raise ModelRetry(
                "Your response was cut off at the output token limit. Answer again, much shorter, "
                "or call a tool."
            )
        return response

    def hooks(self) -> Hooks:
        return Hooks(
            before_tool_execute=self.before, tool_execute=self.around, after_model_request=self.after_response
        )


def _toolsets(
    servers: dict[str, ToolTarget],
    request: CodeRequest,
    ask: ElicitationHandler,
    user_servers: dict[str, ToolTarget],
) -> list[MCPToolset]:
    names = ["fs", "search", "git"] + (["exec"] if request.task.mode == "execute" else [])
    own = [_toolset(servers[name], name, request, ask) for name in names]
    return own + [_toolset(target, f"mcp:{name}", request, ask) for name, target in user_servers.items()]


def _toolset(target: ToolTarget, name: str, request: CodeRequest, ask: ElicitationHandler) -> MCPToolset:
    headers = None
    if isinstance(target, HttpTarget):  # the workspace service's: a URL and its bearer token
        target, headers = target.url, target.headers()
    return MCPToolset(
        target,
        id=name,
        max_retries=request.budget.max_tool_failures,
        read_timeout=MCP_READ_TIMEOUT_S,
        init_timeout=MCP_INIT_TIMEOUT_S,
        elicitation_handler=ask,
        headers=headers,
    )


async def code(
    deps: RoleDeps, task_id: str, request: CodeRequest, *, trace_id: str | None = None
) -> CodeResult:
    task = request.task
    name = task.models.for_role(ROLE)
    if not name:
        raise StepError("env.setup", "no model is configured for the coder")
    in_play = [*request.plan.files_of_interest, *(f.path for f in request.context.files)]
    instructions = await project_instructions(deps.bus, task, files_in_play=in_play)
    workspaces = deps.get(WORKSPACES) or LOCAL
    opening = workspaces.open(
        deps,
        task_id,
        task,
        "code",
        MODE_SCOPES[task.mode],
        patch=request.previous_patch,
        index_dir=index_dir_for(deps, task),
    )
    async with (
        opening as workspace,
        open_user_servers(
            deps, task, MODE_SCOPES[task.mode], cwd=getattr(workspace, "root", None)
        ) as user_servers,
    ):
        answers: list[Answer] = []
        ask = elicitation_handler(
            deps.bus, task_id, timeout_s=task.confirm_timeout_s, on_answer=answers.append
        )
        run_info = RunInfo(task_id=task_id, role=ROLE, step_id=request.step_id, trace_id=trace_id)
        guard = _Guard(
            max_repeated=request.budget.max_repeated_calls, max_failures=request.budget.max_tool_failures
        )
        model = model_for(
            deps,
            task.models.chain_for(ROLE),  # pyright: ignore[reportArgumentType] - the coder runs only with a model, so chain_for(ROLE) is not None
            role=ROLE,
            task_id=task_id,
            budget=request.budget,
        )
        agent = Agent(
            model,
            output_type=str,
            name=ROLE,
            instructions=INSTRUCTIONS[task.mode],
            toolsets=_toolsets(workspace.servers, request, ask, user_servers),
            capabilities=[guard.hooks(), *observer_capabilities(deps, run_info)],
            retries=2,
        )
        limits = UsageLimits(
            request_limit=max(1, request.budget.requests), total_tokens_limit=max(1, request.budget.tokens)
        )
        stopped_by, message, answer = None, "", None
        used = RunUsage()  # filled as the run goes, so a stopped run still reports what it used
        try:
            with model_errors_as_agent_errors(model=name):
                result = await agent.run(
                    _prompt(request, instructions.text),
                    usage_limits=limits,
                    usage=used,
                    timeout=run_timeout_s(request.budget),
                )
            answer = result.output
        except UsageLimitExceeded as exc:
            stopped_by = "budget.tokens" if "token" in str(exc) else "budget.steps"
            used.requests = max(used.requests, request.budget.requests)
            message = budget_stop_message(stopped_by, task, request.budget, used)
        except CostBudgetExceeded as exc:
            stopped_by, message = exc.failure_class, str(exc)
        except TimeoutError:
            stopped_by = "budget.wall"
            message = budget_used_up("budget.wall", task.budgets, during="while coding")
        except (LoopDetected, ModelMisbehaved) as exc:
            # The model's own output ended the run (a loop; output unusable after its retries, a
            # response that never stopped): a hand-off with the partial patch and the usage so far.
            stopped_by, message = exc.failure_class, str(exc)
            if guard.truncated:
                stopped_by = "model.truncated"
                message = f"the model's answers kept running into the output token limit ({exc})"
        patch = await workspace.patch()
    usage = usage_of(used, model)
    usage = usage.model_copy(update={"tool_calls": max(usage.tool_calls, guard.calls)})
    return CodeResult(
        step_id=request.step_id,
        patch=patch.diff if task.mode != "read" else None,
        files_changed=patch.files_changed if task.mode != "read" else [],
        answer=answer,
        stopped_by=stopped_by,
        message=message,
        usage=usage,
        tool_failures=guard.failures,
        approvals=approvals_for(patch.files_changed, answers) if task.mode != "read" else [],
    )


def approvals_for(files_changed: list[str], answers: list[Answer]) -> list[Approval]:
    """The changed paths a person approved: each path an approved question names as a word of its
    own (the fs server's questions name every protected path they are about). A path no approval
    names gets none, so the verifier still fails an unapproved protected change."""
    approvals = []
    for path in files_changed:
        for reply in answers:
            words = {word.rstrip(".?:") for word in re.split(r"[\s,;]+", reply.question)}
            if reply.approved and path in words:
                by = reply.answered_by or "a person"
                approvals.append(
                    Approval(path=path, approved_by=by, request_id=reply.request_id, question=reply.question)
                )
                break
    return approvals


def _prompt(request: CodeRequest, instructions: str = "") -> str:
    task, plan, context = request.task, request.plan, request.context
    parts = []
    if request.feedback:
        parts.append("## Your previous attempt failed verification\n" + request.feedback)
    parts.append(f"## Task\n{task.text}")
    if instructions:
        parts.append(instructions)
    if task.budgets.attempts > 1 and not request.feedback:
        parts.append(
            f"## Attempt {request.attempt} of {task.budgets.attempts}\n"
            "Each attempt starts from the original tree and is verified on its own; one is chosen."
        )
    if task.continuation is not None:
        parts.append("## Continuing an earlier task\n" + task.continuation.brief())
    if plan.steps:
        parts.append("## Plan\n" + "\n".join(f"{i}. {s.description}" for i, s in enumerate(plan.steps, 1)))
    if plan.test_targets:
        parts.append("## Tests that should pass\n" + "\n".join(f"- {t}" for t in plan.test_targets))
    if context.files:
        parts.append("## Relevant files\n" + "\n".join(f"- {f.path}" for f in context.files[:15]))
    if context.raised:
        parts.append(
            "## The task's example, run in the sandbox, raised\n"
            + "\n".join(f"- {r}" for r in context.raised)
        )
    for snippet in context.snippets:
        parts.append(f"### {snippet.path}:{snippet.start_line}-{snippet.end_line}\n```\n{snippet.text}\n```")
    return "\n\n".join(parts)
