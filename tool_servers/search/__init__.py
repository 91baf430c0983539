"""Semantic code search: chunking, embeddings, the LanceDB index, queries.

Two parts: `index/` (walking, chunking, the store and its lock, queries, file ranking, symbols) and
`embedding/` (the encoders and their cache), which knows nothing of the index; only `server.py`
speaks MCP. Public API (import from the modules; no package here imports anything, so `embed`
stays cheap):

    index.code_index.open_index(repo, *, index_dir=None, embedder=None) -> CodeIndex
    await CodeIndex.update(progress=None) -> models.IndexReport
    await CodeIndex.search(query, k=10, per_file=False, mode="hybrid") -> models.SearchResult
    await CodeIndex.find_symbol(name) -> models.SymbolResult
    await CodeIndex.repo_map(token_budget) -> models.RepoMap
    CodeIndex.status() -> models.IndexStatus


Pipeline: `files` walks the repository (skipping binaries, VCS and vendored trees, .gitignore'd
paths, oversized and generated files); `chunks` cuts each file along its structure (`pychunks`
via `ast`, `tschunks` via installed tree-sitter grammars, `docchunks` for Markdown/RST, blank-line
windows otherwise); `embed` turns chunk texts into vectors through a content-addressed cache;
`store` keeps one LanceDB chunk table (vectors + a native full-text index) and a manifest of file
hashes per repository, so updates touch only changed files; `query` fuses vector and keyword
rankings with reciprocal rank fusion and identifier boosts; `symbols` answers definition and
reference look-ups and builds the ranked repo map.
Errors are in `errors`; all result contracts in `models`.
"""
