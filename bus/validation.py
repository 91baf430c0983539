"""What makes a task submission acceptable, as plain values: the one rule set the CLI applies
before publishing and the orchestrator applies to what arrives, since any NATS client may submit.

Pure functions over plain values (no message classes), so both sides and any future message
module can call them. Each returns every problem found, worded for the person who submitted.

Why the text limit: the text is carried by several messages and records (the submission, the
work for a role, the task's record, which also holds the result), each of which must fit the
server's max payload (1 MiB by default). A quarter of it leaves room for a result as large as the
text and for the envelopes; larger inputs belong in the object store, by reference.
"""

import re

from bus import subjects

MAX_TASK_TEXT_BYTES = 96 * 1024
"""Largest task text accepted, in UTF-8 bytes."""
MAX_REPO_CHARS = 4096
"""Longest repository path or URL accepted (PATH_MAX on Linux)."""
MODES = ("read", "write", "execute")
RESERVED_TASK_IDS = frozenset({"mcp"})
"""Task ids the system uses itself: `mcp` collects the hosted tool servers' `tool_call` events."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def task_id_problems(task_id: str) -> list[str]:
    """Why `task_id` cannot name a task: not a subject token, or reserved."""
    if not subjects.is_token(task_id):
        return [f"task id {task_id[:140]!r} may only contain letters, digits, '-' and '_' (1 to 128 of them)"]
    if task_id in RESERVED_TASK_IDS:
        return [f"task id {task_id!r} is reserved; choose another"]
    return []


def text_problems(text: str) -> list[str]:
    """Why `text` cannot be a task's text: blank, or over `MAX_TASK_TEXT_BYTES`."""
    if not text.strip():
        return ["the task text is empty or only whitespace; say what to do"]
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_TASK_TEXT_BYTES:
        return [
            f"the task text is {size:,} bytes; the limit is {MAX_TASK_TEXT_BYTES:,} bytes "
            f"({MAX_TASK_TEXT_BYTES // 1024} KiB): put large material in the repository and refer to it"
        ]
    return []


def repo_problems(repo: str) -> list[str]:
    """Why `repo` cannot name a repository: missing, too long, control characters, or a relative
    path (the orchestrator may run elsewhere, so a path must be absolute; a URL has a scheme)."""
    if not repo.strip():
        return ["the repository is missing; give its absolute path"]
    if len(repo) > MAX_REPO_CHARS:
        return [f"the repository path is {len(repo):,} characters; the limit is {MAX_REPO_CHARS:,}"]
    if _CONTROL.search(repo):
        return [f"the repository path {repo[:200]!r} contains control characters"]
    if "://" not in repo and not repo.startswith("/"):
        return [f"the repository path {repo[:200]!r} is not absolute"]
    return []


def mode_problems(mode: str) -> list[str]:
    if mode not in MODES:
        return [f"mode {mode[:40]!r} is not one of {', '.join(MODES)}"]
    return []


def submission_problems(*, task_id: str | None, text: str, repo: str, mode: str) -> list[str]:
    """Every reason the submission cannot be accepted; empty when it can. `task_id` None means
    one will be generated (always valid)."""
    return [
        *(task_id_problems(task_id) if task_id is not None else []),
        *text_problems(text),
        *repo_problems(repo),
        *mode_problems(mode),
    ]
