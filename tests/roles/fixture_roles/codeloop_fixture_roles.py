"""Plug-in roles for codeloop's tests (installed with `pip install -e tests/roles/fixture_roles`).

- `scripted-coder` (kind `code`): no model; answers every request with the patch the task's text
  carries after a line `patch:` (or none).
- `slow-reviewer` (kind `review`, one request at a time per worker): takes `review-delay: SECONDS`
  from the task's text, then approves, naming the worker's process in its feedback.
"""

import os
import re

import anyio

from agents.api import CodeRequest, ReviewRequest, RoleContext, define_role


async def _code(request: CodeRequest, ctx: RoleContext) -> dict:
    _, found, patch = request.task.text.partition("patch:\n")
    files = re.findall(r"^\+\+\+ b/(\S+)$", patch, re.M)
    return {"patch": patch if found else None, "files_changed": files, "answer": "scripted"}


async def _review(request: ReviewRequest, ctx: RoleContext) -> dict:
    match = re.search(r"^review-delay: ([0-9.]+)$", request.task.text, re.M)
    await anyio.sleep(float(match.group(1)) if match else 0)
    return {"verdict": "approve", "feedback": f"approved by pid {os.getpid()}"}


SCRIPTED_CODER = define_role("scripted-coder", "code", _code, description="a coder without a model (tests)")
SLOW_REVIEWER = define_role(
    "slow-reviewer", "review", _review, concurrency=1, description="approves after a delay (tests)"
)
