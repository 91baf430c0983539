"""The built-in roles, defined with the same role API as any plug-in (`agents/runtime/api.py`) and
installed under the same entry-point group (`codeloop.roles` in codeloop's `pyproject.toml`).

Each definition is a thin typed handler over the role's own module; nothing here is available to
them that a plug-in could not use.
"""

from importlib.metadata import PackageNotFoundError, version

from agents.messages import CodeRequest, ContextRequest, PlanRequest, SelectRequest, VerifyRequest
from agents.roles.coder import code
from agents.roles.echo import echo_spec
from agents.roles.planner import plan
from agents.roles.retriever import retrieve
from agents.roles.selector.role import select
from agents.roles.verifier.role import verify
from agents.roles.verifier.spares import VERIFIER_SPARES
from agents.runtime.api import RoleContext, define_role
from agents.workspace.providers import WORKSPACES


def _version() -> str:
    try:
        return version("codeloop")
    except PackageNotFoundError:  # a source checkout that was never installed
        return "0.0.0"


async def _plan(request: PlanRequest, ctx: RoleContext):
    return await plan(ctx.deps, ctx.task_id, request, trace_id=ctx.trace_id)


async def _retrieve(request: ContextRequest, ctx: RoleContext):
    return await retrieve(ctx.deps, ctx.task_id, request)


async def _code(request: CodeRequest, ctx: RoleContext):
    return await code(ctx.deps, ctx.task_id, request, trace_id=ctx.trace_id)


async def _verify(request: VerifyRequest, ctx: RoleContext):
    return await verify(ctx.deps, ctx.task_id, request)


async def _select(request: SelectRequest, ctx: RoleContext):
    return select(request)


VERSION = _version()
PLANNER = define_role(
    "planner",
    "plan",
    _plan,
    version=VERSION,
    description="a structured plan from the task and a first look at the repository",
)
RETRIEVER = define_role(
    "retriever",
    "retrieve",
    _retrieve,
    version=VERSION,
    description="ranked files, snippets and a repository map within a token budget",
)
CODER = define_role(
    "coder",
    "code",
    _code,
    version=VERSION,
    grant={"read", "write", "execute"},
    needs={WORKSPACES},
    description="changes the code in a scratch workspace with the task's tools",
)
VERIFIER = define_role(
    "verifier",
    "verify",
    _verify,
    version=VERSION,
    grant={"read", "execute"},
    needs={WORKSPACES, VERIFIER_SPARES},
    description="static checks and the tests in the sandbox; the verdict",
)
SELECTOR = define_role(
    "selector",
    "select",
    _select,
    version=VERSION,
    description="chooses one of a task's attempts: evidence, harm, behaviour, agreement, size",
)
ECHO = define_role(
    "echo",
    "echo",
    version=VERSION,
    actor=lambda deps, policy: echo_spec(policy),
    description="the bus's test role: sends the task's text back",
)
