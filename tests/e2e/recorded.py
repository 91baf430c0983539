"""A model that answers with what a real model once answered: the responses of recorded runs.

The task's text names the recordings with lines `planner: PATH` and `coder: PATH` (a run's
`RunRecording` JSON, as `agents/replay/` stores it); request N of the role's run gets the N-th
recorded response, whatever the loop told the model in between — so the loop meets exactly the
output the real model produced. Past the recording's end it answers with an empty response (the
loop must deal with that too).
"""

import json
import re
from pathlib import Path

from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ModelResponse, UserPromptPart


def _prompt(messages) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def _responses(path: Path) -> list[ModelResponse]:
    run = json.loads(path.read_text())
    out: list[ModelResponse] = []
    for entry in run["entries"]:
        if entry["kind"] == "model_response":
            [response] = ModelMessagesTypeAdapter.validate_python([entry["response"]])
            assert isinstance(response, ModelResponse)
            out.append(response)
    return out


def replay(messages, info) -> ModelResponse:
    role = "planner" if info.output_tools and not info.function_tools else "coder"
    found = re.search(rf"^{role}: (\S+)$", _prompt(messages), re.M)
    if found is None:
        return ModelResponse(parts=[])
    responses = _responses(Path(found.group(1)))
    n = sum(isinstance(m, ModelResponse) for m in messages)
    return responses[n] if n < len(responses) else ModelResponse(parts=[])
