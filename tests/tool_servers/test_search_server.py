"""The `search` MCP server: real MCP client sessions, the real
embedding model (loaded once for this module) and real code nobody here wrote (a part of anyio's
installed source, copied to a temporary directory)."""

# The tests drive each step to the state they assert and then read its fields: a None there fails
# the test as an assert would, so the checker's Optional rules are off in this file.
# pyright: reportOptionalMemberAccess=false, reportOptionalSubscript=false, reportOptionalOperand=false

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from codeloop.config.environment import root_home
from tests.tool_servers.ts_conformance import assert_valid
from tests.tool_servers.ts_helpers import CODELOOP
from tool_servers.search.embedding.embed import CachedEmbedder, load_embedder
from tool_servers.search.server import build_search_server

pytestmark = pytest.mark.anyio

ANYIO_SRC = Path(anyio.__file__).parent
# 20 modules, about 160 chunks: real structure to rank against, embedded in seconds.
CORPUS = [
    "_core/_asyncio_selector_thread.py",
    "_core/_concurrency_utils.py",
    "_core/_contextmanagers.py",
    "_core/_eventloop.py",
    "_core/_resources.py",
    "_core/_signals.py",
    "_core/_streams.py",
    "_core/_subprocesses.py",
    "_core/_testing.py",
    "_core/_typedattr.py",
    "_lazyimport.py",
    "abc/_resources.py",
    "abc/_subprocesses.py",
    "abc/_testing.py",
    "streams/buffered.py",
    "streams/file.py",
    "to_interpreter.py",
    "to_process.py",
    "to_thread.py",
    "abc/__init__.py",
]
CALL_TIMEOUT_S = 120  # the first call of a module embeds the corpus on 2 shared cores
Call = Callable[..., Any]


def copy_corpus(dest: Path, files: list[str] = CORPUS) -> Path:
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ANYIO_SRC / rel, dest / rel)
    return dest


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> CachedEmbedder:
    """The bundled model, loaded once for the module, behind an embedding cache private to it
    (so a second copy of the corpus embeds only what differs)."""
    return load_embedder(cache_dir=tmp_path_factory.mktemp("embedding-cache"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared copy of the corpus; tests using it must not change it."""
    return copy_corpus(tmp_path_factory.mktemp("anyio-copy"))


async def _call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(CALL_TIMEOUT_S):
        return await client.call_tool(tool, args)


@pytest.mark.slow
async def test_a_query_naming_a_function_finds_its_definition_first(
    corpus: Path, embedder: CachedEmbedder
) -> None:
    """An identifier query ranks its definition first;
    a description finds its code too."""
    async with Client(build_search_server(corpus, embedder=embedder)) as client:
        named = await _call(client, "search_code", {"query": "open_signal_receiver", "k": 5})
        described = await _call(
            client, "search_code", {"query": "read exactly the given number of bytes from the stream"}
        )
        per_file = await _call(client, "search_code", {"query": "receive_exactly", "per_file": True})
    assert not named.is_error, named.content
    top = named.structured_content["hits"][0]
    assert (top["path"], top["symbol"]) == ("_core/_signals.py", "open_signal_receiver")
    assert "def open_signal_receiver(" in top["snippet"]
    assert len(named.structured_content["hits"]) <= 5
    assert "streams/buffered.py" in [h["path"] for h in described.structured_content["hits"][:3]]
    paths = [h["path"] for h in per_file.structured_content["hits"]]
    assert paths[0] == "streams/buffered.py" and len(paths) == len(set(paths))


SIGNAL_ISSUE = """\
open_signal_receiver hangs when the signal arrives before iteration starts

Registering a receiver and sending SIGHUP to the process before the first `async for` never
delivers the signal; the test below hangs forever instead of receiving it.

```
Traceback (most recent call last):
  File "/home/dev/project/tests/test_signals.py", line 9, in test_receiver_gets_early_signal
    async for signum in signals:
  File "/home/dev/project/_core/_signals.py", line 20, in open_signal_receiver
    return get_async_backend().open_signal_receiver(*signals)
KeyboardInterrupt
```
"""
SIGNAL_TEST = """\
import os
import signal

from anyio import open_signal_receiver


async def test_receiver_gets_early_signal():
    with open_signal_receiver(signal.SIGHUP) as signals:
        os.kill(os.getpid(), signal.SIGHUP)
        async for signum in signals:
            assert signum == signal.SIGHUP
            break
"""


async def test_a_whole_issue_ranks_its_files_and_tests_come_after_the_source_unless_kept(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """File ranking through `search_code`: a long issue with a traceback finds the source file it
        names first; the test file in the traceback ranks after that source, and `keep_tests` (for a
    task about tests) lifts it to the top two."""
    root = copy_corpus(tmp_path / "repo")
    (root / "tests").mkdir()
    (root / "tests" / "test_signals.py").write_text(SIGNAL_TEST)
    query = {"query": SIGNAL_ISSUE, "per_file": True, "k": 10}
    async with Client(build_search_server(root, embedder=embedder)) as client:
        fix = await _call(client, "search_code", query)
        tests = await _call(client, "search_code", {**query, "keep_tests": True})
    assert not fix.is_error and not tests.is_error, (fix.content, tests.content)
    fix_paths = [h["path"] for h in fix.structured_content["hits"]]
    test_paths = [h["path"] for h in tests.structured_content["hits"]]
    assert fix_paths[0] == "_core/_signals.py"
    assert fix_paths.index("tests/test_signals.py") > fix_paths.index("_core/_signals.py")
    assert "tests/test_signals.py" in test_paths[:2]
    score = {h["path"]: h["score"] for h in fix.structured_content["hits"]}
    kept = {h["path"]: h["score"] for h in tests.structured_content["hits"]}
    assert kept["tests/test_signals.py"] > score["tests/test_signals.py"]
    assert len(fix_paths) == len(set(fix_paths))


async def test_find_symbol_returns_the_definition_with_its_path_and_line_and_its_uses(
    corpus: Path, embedder: CachedEmbedder
) -> None:
    """Find_symbol answers definitions (path, `def` line) and references by name."""
    source = (corpus / "streams/buffered.py").read_text().splitlines()
    def_line = next(i for i, line in enumerate(source, 1) if "def receive_exactly(" in line)
    async with Client(build_search_server(corpus, embedder=embedder)) as client:
        result = await _call(client, "find_symbol", {"name": "receive_exactly"})
        missing = await _call(client, "find_symbol", {"name": "no_such_function_here"})
        bad = await _call(client, "find_symbol", {"name": "not an identifier"})
    assert not result.is_error, result.content
    definition = result.structured_content["definitions"][0]
    assert (definition["path"], definition["line"]) == ("streams/buffered.py", def_line)
    assert definition["symbol"] == "BufferedByteReceiveStream.receive_exactly"
    assert "to_process.py" in {r["path"] for r in result.structured_content["references"]}
    assert missing.is_error and missing.structured_content["type"] == "not_found"
    assert "no_such_function_here" in missing.structured_content["message"]
    assert bad.is_error and bad.structured_content["type"] == "invalid_arguments"


async def test_repo_map_stays_within_its_token_budget(corpus: Path, embedder: CachedEmbedder) -> None:
    """The repo map is trimmed to the budget; a larger budget shows more of the outline."""
    async with Client(build_search_server(corpus, embedder=embedder)) as client:
        small = (await _call(client, "repo_map", {"token_budget": 150})).structured_content
        large = (await _call(client, "repo_map", {"token_budget": 4000})).structured_content
    assert 0 < small["tokens"] <= 150 and small["truncated"]
    assert small["files"] and all(f["symbols"] for f in small["files"])
    assert small["files"][0]["path"] + ":" in small["text"]
    assert large["tokens"] <= 4000
    assert len(large["files"]) > len(small["files"])


async def test_a_search_after_an_edit_sees_the_new_code_and_not_the_deleted_file(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """Our choice: queries refresh the index first when files changed, so an edit is visible at once."""
    repo = copy_corpus(tmp_path / "repo")
    target = repo / "to_thread.py"
    query = {"query": "reticulate_splines", "k": 3}
    async with Client(build_search_server(repo, embedder=embedder)) as client:
        before = await _call(client, "search_code", query)
        status = (await _call(client, "index_status", {})).structured_content
        target.write_text(
            target.read_text()
            + '\n\ndef reticulate_splines(count: int) -> int:\n    """Reticulate splines."""\n    return count * 3\n'
        )
        stale = (await _call(client, "index_status", {})).structured_content
        after = await _call(client, "search_code", query)
        refreshed = (await _call(client, "index_status", {})).structured_content
        target.unlink()
        gone = await _call(client, "search_code", {"query": "run_sync", "k": 10})
    assert before.structured_content["hits"][0]["symbol"] != "reticulate_splines"
    assert status["stale"] is False and status["status"]["files"] == len(CORPUS)
    assert stale["stale"] is True
    hit = after.structured_content["hits"][0]
    assert (hit["path"], hit["symbol"]) == ("to_thread.py", "reticulate_splines")
    assert "return count * 3" in hit["snippet"]
    assert refreshed["stale"] is False and refreshed["last_update"]["changed_files"] == 1
    assert "to_thread.py" not in {h["path"] for h in gone.structured_content["hits"]}


async def test_a_query_of_only_stop_words_is_invalid_arguments_before_any_indexing(tmp_path: Path) -> None:
    """A clear `invalid_arguments`, and no model or index
    work for it (the server here has no model: it would have to load one)."""
    (tmp_path / "app.py").write_text("def add(a, b):\n    return a + b\n")
    async with Client(build_search_server(tmp_path)) as client:
        result = await _call(client, "search_code", {"query": "how is the of it"})
        empty = await _call(client, "search_code", {"query": "   "})
        too_many = await _call(client, "search_code", {"query": "add", "k": 0})
    assert result.is_error
    body = result.structured_content
    assert body["type"] == "invalid_arguments"
    assert "only common words" in body["message"] and "how is the of it" in body["message"]
    assert empty.structured_content["type"] == "invalid_arguments" and "empty" in empty.content[0].text
    assert too_many.structured_content["type"] == "invalid_arguments"
    assert not (tmp_path / ".codeloop").exists()  # the index was never opened


async def test_every_search_tool_result_validates_against_its_output_schema(
    corpus: Path, embedder: CachedEmbedder
) -> None:
    """Structured content validates against the declared output schema."""
    calls = [
        ("search_code", {"query": "wait for the process to exit", "k": 3}),
        ("search_code", {"query": "TypedAttributeProvider", "per_file": True}),
        ("find_symbol", {"name": "run_sync", "limit": 2}),
        ("repo_map", {"token_budget": 300}),
        ("index_status", {}),
        ("index_status", {"refresh": True}),
    ]
    async with Client(build_search_server(corpus, embedder=embedder)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        for tool, args in calls:
            result = await _call(client, tool, args)
            assert not result.is_error, (tool, result.content)
            assert_valid(result.structured_content, tools[tool].output_schema)
    assert set(tools) == {
        "search_code",
        "find_symbol",
        "repo_map",
        "index_status",
        "search_files_running_examples",
    }
    assert all(t.annotations.read_only_hint for n, t in tools.items() if n != "search_files_running_examples")
    scopes = {name: t.meta["codeloop/scope"] for name, t in tools.items()}
    assert scopes.pop("search_files_running_examples") == "execute" and set(scopes.values()) == {"read"}


@pytest.mark.slow  # a server process that loads the embedding model
async def test_codeloop_mcp_search_over_stdio_lists_its_tools_and_answers_a_search(
    tmp_path: Path, private_cache_dir: Path
) -> None:
    """`codeloop mcp search --root DIR` is a stdio MCP server (loading the
    model in its own process); a read grant keeps its index in the root's home, not in the tree."""
    repo = copy_corpus(tmp_path / "repo", ["_core/_signals.py", "_core/_resources.py"])
    home = tmp_path / "home"
    params = StdioServerParameters(
        command=CODELOOP,
        args=["mcp", "search", "--root", str(repo), "--scopes", "read"],
        env={
            "PATH": os.environ["PATH"],
            "CODELOOP_CACHE_DIR": str(private_cache_dir),
            "CODELOOP_HOME": str(home),
        },
    )
    with anyio.fail_after(240):
        async with Client(params) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("search_code", {"query": "aclose_forcefully"})
    assert listed == {"search_code", "find_symbol", "repo_map", "index_status"}
    assert not result.is_error, result.content
    top = result.structured_content["hits"][0]
    assert (top["path"], top["symbol"]) == ("_core/_resources.py", "aclose_forcefully")
    assert (root_home(repo, home) / "index").is_dir()
    assert not (repo / ".codeloop").exists()


async def test_running_an_issues_examples_needs_the_execute_scope_and_reports_what_ran(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """Our tool contract: `search_files_running_examples` runs code, so only an execute grant lists
    it; its result is the file ranking plus what the example executed, and the root stays as it was."""
    from tool_servers.protocol.scopes import Scope
    from tool_servers.protocol.spec import ServerOptions

    repo = copy_corpus(tmp_path / "repo", ["_core/_signals.py", "to_thread.py"])
    (repo / "calc").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "shapes.py").write_text(
        "from calc import units\n\n\ndef area(w, h):\n    return units.cm2(w * h)\n"
    )
    (repo / "calc" / "units.py").write_text("def cm2(value):\n    return f'{value} cm2'\n")
    issue = (
        "area() gives the wrong unit\n\n```\n>>> from calc.shapes import area\n>>> area(2, 3)\n'6 cm2'\n```\n"
    )
    read_only = build_search_server(repo, ServerOptions(scopes=frozenset({Scope.READ})), embedder=embedder)
    granted = build_search_server(
        repo,
        ServerOptions(scopes=frozenset({Scope.READ, Scope.EXECUTE})),
        embedder=embedder,
        backend="process",
        index_dir=tmp_path / "index",
    )
    async with Client(read_only) as client:
        hidden = {tool.name for tool in (await client.list_tools()).tools}
    async with Client(granted) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await _call(client, "search_files_running_examples", {"query": issue, "k": 3})
    assert "search_files_running_examples" not in hidden
    spec = tools["search_files_running_examples"]
    assert spec.meta["codeloop/scope"] == "execute" and not spec.annotations.destructive_hint
    assert not result.is_error, result.content
    assert_valid(result.structured_content, spec.output_schema)
    examples = result.structured_content["examples"]
    assert examples["backend"] == "process" and examples["statements"] == 2
    assert examples["files"] == {"calc/shapes.py": 1, "calc/units.py": 1}
    assert result.structured_content["hits"][0]["path"] == "calc/shapes.py"
    assert sorted(p.name for p in repo.rglob("*")) == sorted(
        ["_core", "_signals.py", "to_thread.py", "calc", "__init__.py", "shapes.py", "units.py"]
    )

    # The deployment allows gVisor only and the server was given the process backend: refused, typed.
    pinned = build_search_server(
        repo,
        ServerOptions(scopes=frozenset({Scope.READ, Scope.EXECUTE})),
        embedder=embedder,
        backend="process",
        policy="gvisor",
        index_dir=tmp_path / "index",
    )
    async with Client(pinned) as client:
        refused = await _call(client, "search_files_running_examples", {"query": issue, "k": 3})
    assert refused.is_error and refused.structured_content["type"] == "internal_error"
    assert refused.structured_content["details"] == {"error": "ExamplesForbidden"}
    assert refused.structured_content["message"].startswith("the query's examples cannot run")
