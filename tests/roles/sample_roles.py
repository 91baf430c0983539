"""Plug-in roles for the tests, good and broken, loaded through `importlib.metadata.EntryPoint`s
that point here (as an installed package's entry points would)."""

from agents.messages import CodeRequest, ReviewRequest
from agents.runtime.api import RoleContext, define_role

FIXED_PATCH = "\n".join(
    [
        "diff --git a/calc/__init__.py b/calc/__init__.py",
        "--- a/calc/__init__.py",
        "+++ b/calc/__init__.py",
        "@@ -2,7 +2,7 @@",
        " ",
        " ",
        " def add(a, b):",
        "-    return a - b",
        "+    return a + b",
        " ",
        " ",
        " def mul(a, b):",
        "",
    ]
)


async def _code(request: CodeRequest, ctx: RoleContext) -> dict:
    await ctx.emit("note", f"scripted coder on step {ctx.step_id}")
    return {"patch": FIXED_PATCH, "files_changed": ["calc/__init__.py"], "answer": "fixed add"}


async def _malformed(request: ReviewRequest, ctx: RoleContext) -> dict:
    return {"verdict": "looks fine to me", "findings": "none"}


async def _raises(request: ReviewRequest, ctx: RoleContext) -> dict:
    raise RuntimeError("the reviewer's rules file is missing")


async def _approve(request: ReviewRequest, ctx: RoleContext) -> dict:
    return {"verdict": "approve"}


SAMPLE_CODER = define_role("sample-coder", "code", _code, description="a coder without a model")
MALFORMED_REVIEWER = define_role("malformed-reviewer", "review", _malformed)
RAISING_REVIEWER = define_role("raising-reviewer", "review", _raises)
APPROVER = define_role("approver", "review", _approve)
NOT_A_ROLE = 42
MISNAMED = define_role("called-otherwise", "review", _approve)


def sync_handler(request, ctx):
    return {"verdict": "approve"}


def wrong_signature():
    """A factory whose role's handler is not async: the definition refuses it."""
    return define_role("wrong-signature", "review", sync_handler)  # pyright: ignore[reportArgumentType] - a wrong signature on purpose: the test checks it is refused
