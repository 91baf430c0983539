"""The retriever (no LLM): the code a task is about, ranked and packed into a token budget.

Everything goes through the `search` MCP server, read-only, on a scratch copy of the task's tree:
`search_code` with the task text, per file (the server takes long, issue-shaped queries apart and
ranks files from all their evidence) and per chunk (for snippets), and with each hypothesis of the
plan, `find_symbol` for the identifiers the task or the plan name, and `repo_map` for the shape of
the repository. In execute mode the file ranking comes from `search_files_running_examples`
instead: the code the task shows is also run in the sandbox, files it executed fill ranks 6-10
(the search server's notes say why there), and what it raised inside the repository is passed on
(`Context.raised`): the reported error reproduced, where it happens. The files come in the server's file ranking of the task text; files only the other
evidence found (the hypotheses, the named symbols, the plan's files of interest) follow it, fused
by reciprocal rank. Mixing that evidence into the file ranking instead cost far more than it
brought: on the tune half of a development set of real bug reports (65 cases, exact indexes),
file Acc@1 / MRR were 0.723 / 0.811 for the file ranking alone, 0.308 / 0.507 for the former fusion
of chunk hits, symbols and plan, and 0.431 / 0.618 with the symbols at a quarter weight. The best
snippets are packed with `agents.roles.context.build_context`, which never cuts a snippet mid-line.
"""

import re
from collections import defaultdict
from typing import Any

from pydantic import JsonValue

from agents.messages import Context, ContextRequest, RankedFile
from agents.roles.context import SearchHit, build_context
from agents.runtime.role import (
    RoleDeps,
    StepError,
    index_dir_for,
)
from agents.runtime.tools import NotingClient, mcp_client
from agents.workspace.start import scratch_workspace

ROLE = "retriever"
RRF_K = 60
"""Reciprocal-rank constant, as in the search index's own fusion."""
FILE_K = 20
"""Files taken from the server's file ranking of the task text."""
MAX_SYMBOLS = 8
REPO_MAP_SHARE = 0.2
"""Part of the token budget the repository map may take."""
_IDENTIFIER = re.compile(
    r"`([A-Za-z_][\w.]*)`|\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Z]\w*[a-z]\w*[A-Z]\w*|[a-z]+_[a-z_]\w*)\b"
)


FILE_SUFFIXES = frozenset(
    "py pyi pyx md rst txt toml cfg ini json yaml yml lock csv xml html css js jsx ts tsx go rs java "
    "kt c h cc cpp hpp rb php sh sql ipynb".split()
)
"""Extensions that make a dotted word a file name (`discounts.py`), which no symbol is called."""


def identifiers(text: str) -> list[str]:
    """Names worth a `find_symbol` look-up: backticked, dotted, CamelCase or snake_case words.

    File names are left out: `discounts.py` names a file, the search already ranks it, and looking
    it up as a symbol only fails (an error line in every live view)."""
    seen: list[str] = []
    for match in _IDENTIFIER.finditer(text):
        name = match.group(1) or match.group(2)
        if not name or name in seen or len(name) <= 2:
            continue
        if "." in name and name.rsplit(".", 1)[1].lower() in FILE_SUFFIXES:
            continue
        seen.append(name)
    return seen[:MAX_SYMBOLS]


async def retrieve(deps: RoleDeps, task_id: str, request: ContextRequest) -> Context:
    task, plan = request.task, request.plan
    async with scratch_workspace(deps, task_id, task, "retrieve") as root:
        scopes = frozenset({"read", "execute"} if task.mode == "execute" else {"read"})
        target = deps.tools.servers(root, scopes, index_dir=index_dir_for(deps, task))["search"]
        async with mcp_client(target) as search:
            raised: list[str] = []
            if task.mode == "execute":
                data = await _call(
                    search, "search_files_running_examples", {"query": task.text[:20_000], "k": FILE_K}
                )
                ranked, raised = _hits(data), raised_lines((data or {}).get("examples") or {})
            else:
                ranked = await _search(search, task.text, k=FILE_K, per_file=True)
            lists: list[list[SearchHit]] = [await _search(search, task.text, k=20)]
            for hypothesis in plan.hypotheses[:4]:
                lists.append(await _search(search, hypothesis, k=8))
            symbols = await _symbols(search, identifiers(task.text + "\n" + "\n".join(plan.hypotheses)))
            repo_map = await _repo_map(search, int(request.token_budget * REPO_MAP_SHARE))
    files = _rank([hit.path for hit in ranked], lists, symbols, plan.files_of_interest)
    hits = [*ranked, *(hit for hits in lists for hit in hits)]
    hits.sort(key=lambda h: -_file_score(files, h.path))
    pack = build_context(
        goal=task.text,
        snippets=hits,
        token_budget=max(200, request.token_budget - _estimate(repo_map)),
    )
    return Context(
        step_id=request.step_id,
        files=files,
        snippets=list(pack.snippets),
        repo_map=repo_map,
        raised=raised,
        tokens=pack.tokens + _estimate(repo_map) + sum(_estimate(line) for line in raised),
    )


async def _call(client: NotingClient, tool: str, args: dict[str, JsonValue]) -> dict[str, Any] | None:
    result = await client.call_tool(tool, args)
    if result.is_error:
        text = result.content[0].text if result.content else ""  # pyright: ignore[reportAttributeAccessIssue] - a tool server's error result is text content
        if "not_found" in text or "nothing in the index" in text:
            return None
        raise StepError("env.infra", f"search server: {tool} failed: {text[:500]}")
    return result.structured_content


async def _search(client: NotingClient, query: str, *, k: int, per_file: bool = False) -> list[SearchHit]:
    if not query.strip():
        return []
    return _hits(await _call(client, "search_code", {"query": query[:20_000], "k": k, "per_file": per_file}))


def _hits(data: dict[str, Any] | None) -> list[SearchHit]:
    return [
        SearchHit(
            h["path"], h["start_line"], h["end_line"], h.get("symbol"), h.get("score", 0.0), h["snippet"]
        )
        for h in (data or {}).get("hits", [])
    ]


def raised_lines(examples: dict[str, Any], *, callers: int = 3) -> list[str]:
    """One line per distinct error the examples raised in the repository (a search result's
    `examples`): `ValueError raised at pkg/stats.py:2 in spread, called from pkg/api.py:5 in
    scale`, with up to `callers` repository callers."""
    lines: list[str] = []
    for error in examples.get("raised", []):
        frames = [f"{f['path']}:{f['line']} in {f['function']}" for f in error.get("frames", [])]
        if not frames:
            continue
        line = f"{error['error']} raised at {frames[0]}"
        if len(frames) > 1:
            line += ", called from " + ", ".join(frames[1 : 1 + callers])
        if line not in lines:
            lines.append(line)
    return lines


async def _symbols(client: NotingClient, names: list[str]) -> dict[str, list[str]]:
    """path -> the symbols the task names that are defined there."""
    found: dict[str, list[str]] = defaultdict(list)
    for name in names:
        data = await _call(client, "find_symbol", {"name": name, "limit": 5})
        for definition in (data or {}).get("definitions", []):
            found[definition["path"]].append(name)
    return found


async def _repo_map(client: NotingClient, budget: int) -> str:
    data = await _call(client, "repo_map", {"token_budget": max(100, budget)})
    return (data or {}).get("text", "") if data else ""


def _rank(
    ranked: list[str], lists: list[list[SearchHit]], symbols: dict[str, list[str]], planned: list[str]
) -> list[RankedFile]:
    """The server's file ranking `ranked` first, then the files only the other evidence found, in
    their fused order; scores fall along the list."""
    fused = _fuse(lists, symbols, planned)
    first = dict.fromkeys(ranked)
    order = [*first, *(f.path for f in fused if f.path not in first)][:30]
    why = {f.path: f.why for f in fused}
    return [
        RankedFile(
            path=p,
            score=round(1.0 / (RRF_K + rank + 1), 6),
            why="; ".join(filter(None, ["file ranking" if p in first else "", why.get(p, "")])),
        )
        for rank, p in enumerate(order)
    ]


def _fuse(
    lists: list[list[SearchHit]], symbols: dict[str, list[str]], planned: list[str]
) -> list[RankedFile]:
    score: dict[str, float] = defaultdict(float)
    why: dict[str, list[str]] = defaultdict(list)
    for weight, hits in zip([1.0] + [0.5] * (len(lists) - 1), lists, strict=True):
        best: dict[str, int] = {}
        for rank, hit in enumerate(hits):
            best.setdefault(hit.path, rank)
        for path, rank in best.items():
            score[path] += weight / (RRF_K + rank + 1)
            if "search" not in why[path]:
                why[path].append("search")
    for path, names in symbols.items():
        score[path] += len(names) / (RRF_K + 1)
        why[path].append("defines " + ", ".join(names[:3]))
    for path in planned:
        score[path] += 1.0 / (RRF_K + 1)
        why[path].append("plan")
    ranked = sorted(score, key=lambda p: (-score[p], p))
    return [RankedFile(path=p, score=round(score[p], 6), why="; ".join(why[p])) for p in ranked]


def _file_score(files: list[RankedFile], path: str) -> float:
    for f in files:
        if f.path == path:
            return f.score
    return 0.0


def _estimate(text: str) -> int:
    return -(-len(text) // 4) if text else 0
