"""The task's example as evidence: it raised in the repository on the starting tree (the
retriever ran it, `Context.raised`), and with the patch it runs without raising there.

The example runs the way the retriever ran it, through the search server's
`search_files_running_examples` (execute scope) on the patched workspace, so the same code, setup
and sandbox decide both runs. Asked only when no test showed the problem gone: it costs the
example's run and an incremental index update of the files the patch changed.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.runtime.tools import ScopeName, ToolProvider, mcp_client

EXAMPLE_SCOPES: frozenset[ScopeName] = frozenset({"read", "execute"})


@dataclass(frozen=True)
class TaskExample:
    """What the verifier needs to run the task's example again."""

    text: str
    """The task's text, whose code blocks are the example."""
    raised_before: tuple[str, ...]
    """What it raised on the starting tree, one line per error (`ZeroDivisionError raised at ...`)."""
    index_dir: Path | None = None
    """The repository's search index, so the run updates it instead of building one."""


async def example_evidence(tools: ToolProvider, workspace: Path, example: TaskExample) -> str | None:
    """A line saying the example no longer raises with the patch, or None when it still does, did
    not run (timed out, no example code, the tool failed) or never raised."""
    if not example.raised_before:
        return None
    target = tools.servers(workspace, EXAMPLE_SCOPES, index_dir=example.index_dir)["search"]
    if getattr(target, "before_call", None) is not None:
        await target.before_call()
    async with mcp_client(target) as search:
        result = await search.call_tool(
            "search_files_running_examples", {"query": example.text[:20_000], "k": 1}
        )
    if result.is_error:
        return None
    run: dict[str, Any] = (result.structured_content or {}).get("examples") or {}
    if not run.get("backend") or run.get("timed_out") or not run.get("statements") or run.get("raised"):
        return None
    first = example.raised_before[0].split(", called from")[0]
    return f"the task's example raised before the patch ({first}) and runs without raising with it"
