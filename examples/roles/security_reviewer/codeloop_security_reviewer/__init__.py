"""A codeloop review role: requests changes when a patch adds a hard-coded secret, eval/exec of
input, `shell=True`, or turns TLS verification off; approves otherwise.

Installed with `pip install -e examples/roles/security_reviewer`, it is the role
`security-reviewer` (the entry point in its pyproject.toml); put it in a pipeline as
`review:security-reviewer`. For each finding it asks the search tool server which definition the
line belongs to, so the coder is told where, not only what.
"""

from mcp import Client

from agents.api import ReviewRequest, RoleContext, StepError, define_role
from codeloop_security_reviewer.rules import Hit, scan

NAME = "security-reviewer"


async def review(request: ReviewRequest, ctx: RoleContext) -> dict:
    try:
        hits = scan(request.patch)
    except ValueError as exc:
        raise StepError("patch.malformed", str(exc)) from None
    if not hits:
        await ctx.emit(
            "review_note", f"{NAME}: nothing to flag in {len(request.files_changed)} changed files"
        )
        return {"verdict": "approve", "findings": [], "feedback": "No security problems in the added lines."}
    where = await _enclosing_definitions(ctx, request.patch or "", hits)
    findings = [
        {
            "path": hit.path,
            "line": hit.line,
            "rule": hit.rule,
            "severity": "error",
            "message": hit.message + (f" (in {where[hit]})" if where.get(hit) else ""),
        }
        for hit in hits
    ]
    rules = sorted({hit.rule for hit in hits})
    feedback = (
        f"Remove these from the patch ({', '.join(rules)}); keep the fix itself. "
        "Credentials belong in the environment, not in the code."
    )
    return {"verdict": "request_changes", "findings": findings, "feedback": feedback}


async def _enclosing_definitions(ctx: RoleContext, patch: str, hits: list[Hit]) -> dict[Hit, str]:
    """The symbol (function, class) each flagged line sits in, from the search server's index of
    the patched tree; a line outside any definition (module level) gets none."""
    where: dict[Hit, str] = {}
    async with ctx.workspace("security-review", patch=patch) as root:
        async with Client(ctx.tools(root)["search"]) as search:
            for hit in hits:
                found = await search.call_tool(
                    "search_code", {"query": f"{hit.path} {hit.text.strip()}"[:500], "k": 5}
                )
                if found.is_error:
                    continue
                for item in (found.structured_content or {}).get("hits", []):
                    if (
                        item.get("path") == hit.path
                        and item.get("symbol")
                        and item["start_line"] <= hit.line <= item["end_line"]
                    ):
                        where[hit] = f"{hit.path}: {item['symbol']}"
                        break
    return where


ROLE = define_role(
    NAME,
    "review",
    review,
    version="0.1.0",
    grant={"read"},
    description="requests changes for hard-coded secrets, eval/exec of input, shell=True, TLS verification off",
)
