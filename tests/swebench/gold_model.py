"""A scripted model (`--model function:tests/swebench/gold_model.py:solve`) standing in for an
LLM: as the planner it answers a one-step plan; as the coder it applies the synthetic instance's
gold patch through the `apply_patch` tool, then ends with a text. It decides from what it is
given (the task text, the tools' results), never from hidden state."""

import importlib.util
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo

_spec = importlib.util.spec_from_file_location("swebench_synthetic", Path(__file__).with_name("synthetic.py"))
assert _spec is not None and _spec.loader is not None
synthetic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synthetic)


def solve(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if info.output_tools and not info.function_tools:  # the planner
        plan = {
            "steps": [{"description": "Make add return the sum", "files": ["calc/core.py"]}],
            "hypotheses": ["add subtracts"],
            "files_of_interest": ["calc/core.py"],
            "test_targets": [],
            "done_criteria": ["add(2, 3) == 5"],
            "revision_reason": None,
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)])
    applied = any(
        isinstance(p, ToolReturnPart) and p.tool_name == "apply_patch" for m in messages for p in m.parts
    )
    if applied:
        return ModelResponse(parts=[TextPart("add now returns a + b")])
    return ModelResponse(parts=[ToolCallPart("apply_patch", {"patch": synthetic.GOLD_1})])
