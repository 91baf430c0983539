"""Where codeloop keeps its state: the names of its two directories and of what is in them.

A leaf every package may import (like `redaction`): the per-tree directory is skipped by the
walkers (agents, search), read-only to the tools (tool_servers), protected in the sandbox and in
reviewed patches (sandbox, agents); the home is laid out by the composition root and the bus.
One definition, so a rename cannot leave one of them guarding the old name.

The tree: `<root>/.codeloop/`
    index/        the code index `codeloop index ROOT` builds (and the lock beside its table)
    exec/         the sandbox's outbox: reports a tool reads back (pytest's JUnit XML)

A scratch workspace's git directory: `<workspace>/.git/`
    codeloop-source-dates.json   when the repository it was made from last changed the files a
                  project environment's recipe reads (the workspace's own history is one fresh
                  commit), so its environment resolves as the repository's does

The home: `$CODELOOP_HOME`, default `~/.codeloop/`
    serve.json              what a running `codeloop serve` noted (NATS URL, tool server URLs)
    mcp-tokens              the hosted tool servers' bearer token (mode 0600, new at every start)
    mcp-audit.jsonl         their audit log; mcp-audit-stdio.jsonl for `--tools-stdio` servers
    user-mcp-audit.jsonl    the audit log of every call of the user's own MCP servers
    logs/mcp-servers/       the user's stdio MCP servers' stderr, one NAME.log each
    nats/                   the embedded NATS server's store
    work/                   scratch directories, one per task step
    patches/<task id>.patch a patch `codeloop run --apply` did not apply, kept for the user
    index/                  the workers' code indexes
    coverage/               the verifier's coverage runs of starting trees, one JSON file per tree
    local-models/           the logs of the llama.cpp servers of `local:` models, one per model file
    roots/<name>-<hash>/    per served root: `codeloop mcp`'s audit.jsonl and index/
"""

from pathlib import PurePosixPath

TREE_DIR = ".codeloop"
"""codeloop's directory at the top of a working tree."""
TREE_INDEX = PurePosixPath(TREE_DIR, "index")
TREE_OUTBOX = PurePosixPath(TREE_DIR, "exec")

SOURCE_DATES = "codeloop-source-dates.json"
"""In a scratch workspace's `.git/`: path -> the committer date (ISO 8601) of the last commit that
changed it in the source checkout, for the dependency files that were as committed there."""

HOME_ENV = "CODELOOP_HOME"
DEFAULT_HOME = "~/.codeloop"
SERVE_NOTE = "serve.json"
MCP_TOKENS = "mcp-tokens"
CONSOLE_TOKEN = "console-token"
"""The web console's generated access token (0600, replaced at every start of `codeloop serve`)."""
MCP_AUDIT = "mcp-audit.jsonl"
MCP_AUDIT_STDIO = "mcp-audit-stdio.jsonl"
WORKSPACES_AUDIT = "workspaces-audit.jsonl"
"""The workspace service's audit log of every tool call made through it (`serve --workspaces`)."""
USER_MCP_AUDIT = "user-mcp-audit.jsonl"
"""The audit log of every call the roles make to the user's own MCP servers (`tool_servers.relay`)."""
USER_MCP_LOGS = "logs/mcp-servers"
NATS_DIR = "nats"
WORK_DIR = "work"
PATCHES_DIR = "patches"
"""Patches `codeloop run --apply` could not apply (or was not allowed to), one file per task."""
INDEX_DIR = "index"
COVERAGE_DIR = "coverage"
LOCAL_MODELS_DIR = "local-models"
ROOTS_DIR = "roots"
ROOT_AUDIT = "audit.jsonl"
