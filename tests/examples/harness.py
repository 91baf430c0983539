"""Runs a scripted model the way the coder and planner roles do: a real pydantic-ai `Agent` over
real in-process MCP servers (fs, git, exec on the process sandbox backend) rooted at a copy."""

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import UsageLimits

from agents.messages import Plan
from agents.models.names import load_function_model
from tool_servers.protocol.scopes import Scope
from tool_servers.protocol.spec import ServerOptions
from tool_servers.serve import server_builder

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCRIPTED = EXAMPLES / "models" / "scripted.py"
PYTEST_ENV = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
"""The example projects use no pytest plugins; loading the environment's costs seconds a run."""
MODE_SCOPES = {
    "read": frozenset({Scope.READ}),
    "write": frozenset({Scope.READ, Scope.WRITE}),
    "execute": frozenset({Scope.READ, Scope.WRITE, Scope.EXECUTE}),
}


def scripted(name: str) -> FunctionModel:
    """The scripted model `name`, loaded as `--model function:examples/models/scripted.py:NAME` is."""
    return load_function_model(f"function:{SCRIPTED}:{name}")


def copy_repo(source: Path, dest: Path) -> Path:
    """A git repository holding a copy of `source` (one commit), as a scratch workspace is."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *argv], cwd=dest, check=True
        )
    return dest


@dataclass
class Run:
    output: str
    messages: list[ModelMessage]
    requests: int

    def tool_calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (part.tool_name, part.args_as_dict())
            for message in self.messages
            for part in message.parts
            if part.part_kind == "tool-call"
        ]


async def run_coder(
    model: FunctionModel, root: Path, prompt: str, *, mode: str, request_limit: int = 40
) -> Run:
    scopes = MODE_SCOPES[mode]
    options = ServerOptions(scopes=scopes)
    names = ["fs", "git"] + (["exec"] if mode == "execute" else [])
    toolsets = []
    for name in names:
        extra = {"backend": "process"} if name == "exec" else {}
        server = server_builder(name)(root, options, **extra)
        toolsets.append(MCPToolset(server, id=name, max_retries=3, read_timeout=120, init_timeout=30))
    agent = Agent(model, output_type=str, instructions="coder", toolsets=toolsets, retries=2)
    result = await agent.run(prompt, usage_limits=UsageLimits(request_limit=request_limit))
    return Run(result.output, result.all_messages(), result.usage.requests)


async def run_planner(model: FunctionModel, prompt: str) -> Plan:
    agent = Agent(model, output_type=Plan, instructions="planner")
    return (await agent.run(prompt)).output


@dataclass
class PytestRun:
    returncode: int
    stdout: str

    def outcomes(self) -> dict[str, str]:
        """node id -> PASSED/FAILED/ERROR, from the `-rA` summary."""
        found = re.finditer(r"^(PASSED|FAILED|ERROR) (\S+::\S+?)(?: - .*)?$", self.stdout, re.M)
        return {m.group(2): m.group(1) for m in found}


async def pytest_on(root: Path, *node_ids: str) -> PytestRun:
    """Plain pytest on a copy, outside any sandbox: the check of what a run left behind."""
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *node_ids],
            cwd=root,
            env=PYTEST_ENV,
            check=False,
        )
    return PytestRun(done.returncode, done.stdout.decode())


def coder_prompt(task: str, files: list[str], *, feedback: str | None = None) -> str:
    """The prompt the coder role builds (agents/roles/coder.py `_prompt`), for the parts the scripts read."""
    parts = [f"## Your previous attempt failed verification\n{feedback}"] if feedback else []
    parts.append(f"## Task\n{task}")
    parts.append("## Plan\n1. Find the failing tests\n2. Fix the code")
    if files:
        parts.append("## Relevant files\n" + "\n".join(f"- {f}" for f in files))
    return "\n\n".join(parts)
