"""The misbehaving shapes of a recorded LLM run: what a real model emitted that a well-behaved
scripted one would not (docs/models.md, "What to expect of small models")."""

import json
from typing import Any

SHAPES = (
    "malformed_json",
    "unknown_tool",
    "wrong_arguments",
    "text_instead_of_structure",
    "empty",
    "repeated_call",
    "truncated",
)


def shapes_of(run: dict[str, Any]) -> set[str]:
    """The shapes in `run` (a `RunRecording` as JSON): read from its responses and tool results."""
    offered = {t["name"] for t in run.get("tools", [])}
    found: set[str] = set()
    last_call: str | None = None
    for entry in run["entries"]:
        if entry["kind"] == "tool_result":
            if entry.get("outcome") == "retried" and "invalid_arguments" in json.dumps(entry.get("result")):
                found.add("wrong_arguments")
            continue
        response = entry["response"]
        parts = response.get("parts", [])
        if response.get("finish_reason") == "length":
            found.add("truncated")
        if not [p for p in parts if p.get("part_kind") != "text" or p.get("content")]:
            found.add("empty")
        calls = [p for p in parts if p.get("part_kind") == "tool-call"]
        if run["role"] == "planner" and not calls and parts:
            found.add("text_instead_of_structure")
        for call in calls:
            args = call.get("args")
            if isinstance(args, str):
                try:
                    json.loads(args)
                except ValueError:
                    found.add("malformed_json")
            if offered and call["tool_name"] not in offered and call["tool_name"] != "final_result":
                found.add("unknown_tool")
            key = call["tool_name"] + json.dumps(args, sort_keys=True)
            if key == last_call:
                found.add("repeated_call")
            last_call = key
    return found
