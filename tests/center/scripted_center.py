"""Scripted model decisions for the configuration center's tests (`function:...:NAME`); every
response reports token usage, so the quota ledger has something to count.

`metered`: as the planner a one-step plan; as the coder it writes `notes.txt` in two writes, then
answers: four model requests in all, 150 tokens each (600 per task).
"""

import os
import re
import time
from pathlib import Path

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.usage import RequestUsage

TOKENS_IN, TOKENS_OUT = 100, 50


def _usage() -> RequestUsage:
    return RequestUsage(input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)


def metered(messages, info) -> ModelResponse:
    if info.output_tools and not info.function_tools:
        plan = {"steps": [{"description": "write the notes"}], "hypotheses": [], "files_of_interest": []}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)], usage=_usage())
    writes = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    if len(writes) < 2:
        content = "first line\n" if not writes else "first line\nsecond line\n"
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": "notes.txt", "content": content})], usage=_usage()
        )
    return ModelResponse(parts=[TextPart("wrote notes.txt")], usage=_usage())


def metered_hang_once(messages, info) -> ModelResponse:
    """`metered`, except that the first coder call of a task whose text names `marker: PATH`
    writes this process's id to PATH and hangs (until the process is killed)."""
    if not (info.output_tools and not info.function_tools):
        prompt = " ".join(
            p.content
            for m in messages
            for p in getattr(m, "parts", [])
            if isinstance(getattr(p, "content", None), str)
        )
        found = re.search(r"marker: (\S+)", prompt)
        if found and not Path(found.group(1)).exists():
            Path(found.group(1)).write_text(str(os.getpid()))
            time.sleep(3600)
    return metered(messages, info)
