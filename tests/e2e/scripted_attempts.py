"""Scripted decisions for the attempts task (`function:tests/e2e/scripted_attempts.py:NAME`): the
planner of `scripted_calc`, and a coder of `calc/ops.py`'s `mean` (which divides by one less than
the count) whose attempt, read from its prompt's "## Attempt K of N", decides what it writes."""

import re

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from tests.e2e.scripted_calc import _plan, _prompt, _returns

RIGHT = "def total(xs):\n    return sum(xs)\n\n\ndef mean(xs):\n    return total(xs) / len(xs)\n"
WRONG = "def total(xs):\n    return sum(xs)\n\n\ndef mean(xs):\n    return total(xs) / (len(xs) + 1)\n"
BREAKS_TOTAL = "def total(xs):\n    return sum(xs) + 1\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n"
BY_ATTEMPT = {1: WRONG, 2: BREAKS_TOTAL, 3: RIGHT}
"""Attempt 1 leaves test_mean failing, attempt 2 fixes it but breaks test_total, attempt 3 is right."""


def three_ways(messages, info) -> ModelResponse:
    """Plan; then per attempt: write `BY_ATTEMPT[K]` to calc/ops.py and stop."""
    if info.output_tools and not info.function_tools:
        return _plan(info)
    if not _returns(messages):
        found = re.search(r"^## Attempt (\d+) of \d+$", _prompt(messages), re.M)
        attempt = int(found.group(1)) if found else 1
        text = BY_ATTEMPT.get(attempt, RIGHT)
        return ModelResponse(parts=[ToolCallPart("write_file", {"path": "calc/ops.py", "content": text})])
    return ModelResponse(parts=[TextPart("rewrote calc/ops.py")])
