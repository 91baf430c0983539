"""The composition root's tool provider, through real in-process MCP sessions."""

from pathlib import Path

import anyio
import pytest
from mcp import Client

from codeloop.wiring.tools import InProcessTools
from tool_servers.search.embedding.embed_cache import EmbeddingCache, default_cache_dir

pytestmark = pytest.mark.anyio


async def test_search_queries_through_the_shared_embedder_are_not_stored_in_the_embedding_cache(
    tmp_path: Path,
) -> None:
    """The shared cache holds chunk texts, which recur across checkouts; a query is embedded fresh,
    so the cache does not grow by every distinct query the agents ever sent."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "ring.py").write_text(
        "def rotate(items, steps):\n    '''Move every item `steps` places to the right.'''\n"
        "    return items[-steps:] + items[:-steps]\n"
    )
    tools = InProcessTools(sandbox_backend="process")
    search = tools.servers(repo, frozenset({"read"}), index_dir=tmp_path / "index")["search"]
    with anyio.fail_after(240):
        async with Client(search) as client:
            first = await client.call_tool("search_code", {"query": "shift a list around by n places"})
            assert not first.is_error, first.content
            cache = EmbeddingCache(default_cache_dir())
            stored = cache.count()
            assert stored > 0  # the chunks went in
            for query in ("turn a sequence like a wheel", "cyclic shift of elements"):
                result = await client.call_tool("search_code", {"query": query, "per_file": True})
                assert not result.is_error, result.content
                assert result.structured_content["hits"][0]["path"] == "ring.py"
    assert cache.count() == stored
    cache.close()
