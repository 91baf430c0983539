"""The `search` MCP server: semantic and keyword code search over one root's code index.

Tools in scope `read`: `search_code` (hybrid retrieval), `find_symbol` (definitions and
references), `repo_map` (ranked outline within a token budget), `index_status`. In scope `execute`:
`search_files_running_examples`, the per-file ranking plus what the query's example code executes
when run in the sandbox (on a scratch copy of the indexed files: the root is never written).

Building the server is cheap: nothing heavy is imported and no model is loaded until the first
call that needs the index (`LiveIndex`). Then the embedding model loads once per server, in a
worker thread, and the index opens on `index_dir` (`codeloop mcp` and `codeloop serve` pass one in
the codeloop home, so serving writes nothing under the root; without one, `<root>/.codeloop/index`). Before each
query the index is brought up to date if any file changed, so a search right after an edit sees
the new code: the change check is a stat-only walk of the tree (`freshness.tree_fingerprint`, no
file read), and only a changed fingerprint pays for an incremental
`CodeIndex.update` (which re-reads and hashes every file, then re-embeds the changed ones).

The server's lifespan owns the open index: it is dropped when the last session ends (once per
process over stdio and HTTP); the loaded model stays with the server object.
"""

import functools
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field

from sandbox.environments.settings import EnvironmentSettings
from tool_servers.project_environment import default_environment_settings
from tool_servers.protocol.errors import InternalError, InvalidArguments, NotFound, ToolTimeout
from tool_servers.protocol.scopes import Risk, Scope
from tool_servers.protocol.sdk import build_server
from tool_servers.protocol.spec import CallContext, ServerOptions, ToolSpec, read_tool
from tool_servers.search.errors import ExamplesForbidden, IndexLocked, InvalidQuery, RepoNotFound, SearchError
from tool_servers.search.index.freshness import Fingerprint, tree_fingerprint
from tool_servers.search.models import (
    EXAMPLE_TIMEOUT_S,
    IndexReport,
    IndexStatus,
    RepoMap,
    SearchResult,
    SymbolResult,
)
from tool_servers.secret_files import DEFAULT_RULES, SecretRules

if TYPE_CHECKING:
    from tool_servers.search.index.code_index import CodeIndex, Embedder

MAX_QUERY_CHARS = 100_000
"""A whole issue (title, prose, tracebacks, pasted code) is a good query for file ranking."""
MAX_K = 50
MAX_REFERENCES = 1000
MAX_MAP_TOKENS = 32_768
LOCK_WAIT_S = 120.0
"""How long a call waits for another indexer (e.g. `codeloop index`) holding the index lock."""
_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class SearchCodeInput(BaseModel):
    model_config = _CONFIG
    query: str = Field(max_length=MAX_QUERY_CHARS)
    """What to look for: what the code does ("retry a failed request") and/or names it uses
    (`open_file`, `Client.send`). A query naming a symbol finds its definition first."""
    k: int = Field(default=10, ge=1, le=MAX_K)
    """How many hits to return."""
    per_file: bool = False
    """One hit per file (its best chunk): which files matter rather than which lines. Files are
    ranked from all the query's evidence: paths, traceback frames and names it mentions, keyword
    and meaning; give the whole issue text as the query."""
    keep_tests: bool = False
    """With `per_file`: rank test files like source files (a task about tests). By default they
    rank after the source files they test."""


class SearchFilesRunningExamplesInput(BaseModel):
    model_config = _CONFIG
    query: str = Field(max_length=MAX_QUERY_CHARS)
    """The whole issue text: its interpreter sessions and code blocks are the examples run."""
    k: int = Field(default=10, ge=1, le=MAX_K)
    """How many files to return."""
    keep_tests: bool = False
    """Rank test files like source files (a task about tests)."""
    setup: str = Field(default="", max_length=20_000)
    """Python run before the examples, untraced: what an interactive session of the project starts
    with (its imports and variables). Without it, a name the examples never define is still taken
    from the repository's top-level packages, or from where its doctests import it."""
    timeout_s: float = Field(default=EXAMPLE_TIMEOUT_S, gt=0, le=120)
    """Seconds for the example statements, after the setup."""


class FindSymbolInput(BaseModel):
    model_config = _CONFIG
    name: str = Field(min_length=1, max_length=200)
    """A bare or dotted identifier: `open_file`, `Client.send`."""
    limit: int = Field(default=100, ge=1, le=MAX_REFERENCES)
    """Most references returned (definitions are always all returned)."""


class RepoMapInput(BaseModel):
    model_config = _CONFIG
    token_budget: int = Field(default=1024, ge=32, le=MAX_MAP_TOKENS)
    """Upper bound on the estimated tokens of the rendered map."""


class IndexStatusInput(BaseModel):
    model_config = _CONFIG
    refresh: bool = False
    """Bring the index up to date before answering (waits for any indexing in progress)."""


class IndexProgress(BaseModel):
    model_config = _CONFIG
    stage: Literal["scan", "embed", "write"]
    """Current stage of the update in progress."""
    done: int
    """Units done in this stage (files for `scan`, chunks for `embed`)."""
    total: int
    """Units in this stage."""


class IndexStatusOutput(BaseModel):
    model_config = _CONFIG
    status: IndexStatus
    """The index as the server last saw it."""
    stale: bool
    """True when files changed since the server's last update: the next query re-indexes them first."""
    indexing: IndexProgress | None
    """The update running right now, or None."""
    last_update: IndexReport | None
    """What this server's most recent update did (changed files, embedded chunks, rebuild
    messages); None before its first."""


class LiveIndex:
    """The root's `CodeIndex`, opened on first use and refreshed before each query.

    Calls may overlap: opening happens once under `_open_lock`; change checks and updates are
    serialised under `_update_lock`, so concurrent queries after an edit cause one update.
    """

    def __init__(
        self,
        root: Path,
        *,
        index_dir: Path | str | None,
        embedder: "Embedder | None",
        secrets: SecretRules = DEFAULT_RULES,
        cache_root: Path | None = None,
    ) -> None:
        self.root = root
        self.secrets = secrets
        self.cache_root = cache_root  # for the model it loads; None: the platform's (`embed_cache`)
        self.index_dir = index_dir
        self.embedder = embedder
        self.progress: IndexProgress | None = None
        self.last_update: IndexReport | None = None
        self._index: CodeIndex | None = None
        self._fingerprint: Fingerprint | None = None
        self._open_lock = anyio.Lock()
        self._update_lock = anyio.Lock()
        self._sessions = 0
        local = index_dir is not None and "://" not in str(index_dir)
        self._skip = [Path(index_dir).expanduser().resolve()] if local else []  # pyright: ignore[reportArgumentType] - local is true only when index_dir is set

    def _fingerprint_now(self) -> Fingerprint:
        return tree_fingerprint(self.root, skip=self._skip)

    @asynccontextmanager
    async def session(self) -> AsyncIterator["LiveIndex"]:
        """Lifespan of one MCP session; the index is dropped when the last one ends."""
        self._sessions += 1
        try:
            yield self
        finally:
            self._sessions -= 1
            if self._sessions == 0:
                self._index = None
                self._fingerprint = None

    async def opened(self) -> "CodeIndex":
        """The index, opened (and the model loaded, in a worker thread) on the first call."""
        async with self._open_lock:
            if self._index is None:
                from tool_servers.search.embedding.embed import load_embedder
                from tool_servers.search.index.code_index import open_index

                if self.embedder is None:
                    # Shielded: a worker thread cannot be stopped anyway, and a client that gave up
                    # waiting should not make the next call load the model again.
                    with anyio.CancelScope(shield=True):
                        self.embedder = await anyio.to_thread.run_sync(
                            functools.partial(load_embedder, cache_root=self.cache_root)
                        )
                self._index = await open_index(
                    self.root,
                    index_dir=self.index_dir,
                    embedder=self.embedder,
                    lock_timeout_s=LOCK_WAIT_S,
                    secrets=self.secrets,
                )
            return self._index

    async def fresh(self) -> "CodeIndex":
        """The index, updated first if any file changed since the last update."""
        index = await self.opened()
        async with self._update_lock:
            # Taken before the update: an edit made while it runs shows up in the next check.
            fingerprint = await anyio.to_thread.run_sync(self._fingerprint_now)
            if fingerprint != self._fingerprint:
                try:
                    self.last_update = await index.update(progress=self._on_progress)
                finally:
                    self.progress = None
                self._fingerprint = fingerprint
        return index

    async def is_stale(self) -> bool:
        return await anyio.to_thread.run_sync(self._fingerprint_now) != self._fingerprint

    def _on_progress(self, stage: str, done: int, total: int) -> None:
        self.progress = IndexProgress(stage=stage, done=done, total=total)  # type: ignore[arg-type] - stage is one of the IndexProgress literals, set by the indexer


@contextmanager
def _as_tool_errors() -> Iterator[None]:
    """Translate the index's errors into the protocol's typed errors, where they leave the index."""
    try:
        yield
    except InvalidQuery as exc:
        raise InvalidArguments(str(exc)) from exc
    except RepoNotFound as exc:
        raise NotFound(str(exc)) from exc
    except IndexLocked as exc:
        raise ToolTimeout(str(exc), waited_s=LOCK_WAIT_S) from exc
    except ExamplesForbidden as exc:  # the sandbox policy, not the index
        raise InternalError(str(exc), error=type(exc).__name__) from exc
    except SearchError as exc:  # model missing, storage failure, embedding cache unusable
        raise InternalError(f"the code index failed: {exc}", error=type(exc).__name__) from exc


class SearchTools:
    """Handlers of the `search` server over one `LiveIndex`; `backend` and `policy` choose the
    sandbox a query's examples run in."""

    def __init__(
        self,
        live: LiveIndex,
        *,
        backend: str = "auto",
        policy: str = "auto",
        environment: "EnvironmentSettings | None" = None,
    ) -> None:
        self.live = live
        self.backend = backend
        self.policy = policy
        self.environment = environment
        """How the repository's project environment (the examples' interpreter) is found and built."""

    async def search_code(self, args: SearchCodeInput, call: CallContext) -> SearchResult:
        from tool_servers.search.index.query import parse_query

        with _as_tool_errors():
            parse_query(args.query)  # an unsearchable query is refused before any model or index work
            index = await self.live.fresh()
            return await index.search(
                args.query, k=args.k, per_file=args.per_file, keep_tests=args.keep_tests
            )

    async def search_files_running_examples(
        self, args: SearchFilesRunningExamplesInput, call: CallContext
    ) -> SearchResult:
        from tool_servers.search.examples.run import search_running_examples
        from tool_servers.search.index.query import parse_query

        with _as_tool_errors():
            parse_query(args.query)
            index = await self.live.fresh()
            return await search_running_examples(
                index,
                args.query,
                k=args.k,
                keep_tests=args.keep_tests,
                setup=args.setup,
                timeout_s=args.timeout_s,
                backend=self.backend,  # pyright: ignore[reportArgumentType] - the backend was validated by parse_policy when the server was built
                policy=self.policy,
                environment=self.environment,
            )

    async def find_symbol(self, args: FindSymbolInput, call: CallContext) -> SymbolResult:
        with _as_tool_errors():
            index = await self.live.fresh()
            result = await index.find_symbol(args.name, limit=args.limit)
        if not result.definitions and not result.references:
            raise NotFound(
                f"nothing in the index defines or uses {args.name!r}; check the spelling, or describe "
                "the code to search_code instead",
                name=args.name,
            )
        return result

    async def repo_map(self, args: RepoMapInput, call: CallContext) -> RepoMap:
        with _as_tool_errors():
            index = await self.live.fresh()
            return await index.repo_map(args.token_budget)

    async def index_status(self, args: IndexStatusInput, call: CallContext) -> IndexStatusOutput:
        with _as_tool_errors():
            index = await (self.live.fresh() if args.refresh else self.live.opened())
            stale = await self.live.is_stale()
            return IndexStatusOutput(
                status=index.status(),
                stale=stale,
                indexing=self.live.progress,
                last_update=self.live.last_update,
            )


def search_tools(
    live: LiveIndex,
    *,
    backend: str = "auto",
    policy: str = "auto",
    environment: "EnvironmentSettings | None" = None,
) -> list[ToolSpec]:
    """The `search` tool specs over `live`."""
    tools = SearchTools(live, backend=backend, policy=policy, environment=environment)
    return [
        read_tool(
            "search_code",
            (
                "Search the code by meaning and keywords (hybrid: vectors + full text, fused). Returns "
                "the best chunks (functions, classes, sections) with path, lines and source. Files "
                "changed since the last query are re-indexed first."
            ),
            SearchCodeInput,
            SearchResult,
            tools.search_code,
        ),
        ToolSpec(
            name="search_files_running_examples",
            description=(
                "Rank the files an issue is about, like search_code per file, and also run the code the "
                "issue shows (interpreter sessions, code blocks) in the sandbox on a scratch copy of the "
                "indexed files: ranks 6-10 go to files it executed, and the files of the tracebacks it raised gain "
                "as a pasted traceback's do. Returns the files and what ran (and raised)."
            ),
            scope=Scope.EXECUTE,
            input_model=SearchFilesRunningExamplesInput,
            output_model=SearchResult,
            handler=tools.search_files_running_examples,
            risk=Risk.MEDIUM,
            read_only=False,  # it runs the code (in the sandbox, on a copy: the root is never written)
            idempotent=False,
        ),
        read_tool(
            "find_symbol",
            (
                "Find where a function, class or method is defined (path, line, signature) and the "
                "lines that use it."
            ),
            FindSymbolInput,
            SymbolResult,
            tools.find_symbol,
        ),
        read_tool(
            "repo_map",
            (
                "Outline of the repository: per file, its top-level symbols with signatures, most "
                "referenced files first, trimmed to a token budget."
            ),
            RepoMapInput,
            RepoMap,
            tools.repo_map,
        ),
        read_tool(
            "index_status",
            (
                "State of the code index: files and chunks indexed, model, whether files changed "
                "since the last update, the update in progress and what the last one did."
            ),
            IndexStatusInput,
            IndexStatusOutput,
            tools.index_status,
        ),
    ]


def build_search_server(
    root: Path,
    options: ServerOptions | None = None,
    *,
    index_dir: Path | str | None = None,
    embedder: "Embedder | None" = None,
    cache_root: Path | None = None,
    backend: str = "auto",
    policy: str = "auto",
    environment: "EnvironmentSettings | None" = None,
    **_: Any,
) -> MCPServer[object]:
    """The `search` MCP server over the code under `root`.

    `index_dir` is where the index lives (a directory or LanceDB URI; default
    `<root>/.codeloop/index`); `embedder` is an already loaded model to share (default: the
    bundled model, loaded on first use, with its caches under `cache_root`, default the
    platform's cache directory). `backend` and `policy` (the deployment's CODELOOP_SANDBOX) choose
    the sandbox `search_files_running_examples` runs examples in; `environment` how the examples'
    interpreter, the repository's project environment, is found (default: detected, cached under
    `cache_root`).
    """
    options = options or ServerOptions()
    live = LiveIndex(
        Path(root).resolve(),
        index_dir=index_dir,
        embedder=embedder,
        secrets=options.secrets,
        cache_root=cache_root,
    )

    @asynccontextmanager
    async def lifespan(_server: MCPServer[object]) -> AsyncIterator[LiveIndex]:
        async with live.session():
            yield live

    return build_server(
        "search",
        search_tools(
            live,
            backend=backend,
            policy=policy,
            environment=environment or default_environment_settings(cache_root),
        ),
        options,
        instructions=(
            "Code search over one repository: search_code for code by meaning or name, find_symbol "
            "for definitions and uses, repo_map for an outline. Paths are relative to the root."
        ),
        lifespan=lifespan,
    )
