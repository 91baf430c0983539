"""Whether a replayed tool observation is the recorded one, ignoring what differs by nature.

Two runs of one tool on one tree differ in ways that say nothing about the tool: the scratch
workspace's path (a new directory per step) and timings (`0.12s`, `duration_s`). Those are masked
on both sides before comparing; everything else must be equal.
"""

import json
import re
from pathlib import Path

from pydantic import JsonValue

from agents.replay.model import Divergence, Entry, excerpt
from layout import WORK_DIR

_TIMING_KEYS = re.compile(r"(?i)(^|_)(duration|elapsed|wall|time|seconds|latency)(_s|_ms)?$|_s$")
_TIMING_TEXT = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|sec|seconds)\b")


_ANY_SCRATCH = re.compile(
    r"(?:/[^/\s\"']+)+/" + re.escape(WORK_DIR) + r"/[^/\s\"']+-[0-9a-f]{8}(?=[/\s\"']|$)"
)
"""A step's workspace under any worker's scratch area (`<home>/work/<task>-<label>-<8 hex>`): a
run recorded by one worker is replayed by whichever takes the step, whose home is another."""


class Comparer:
    def __init__(self, *, scratch_dir: Path | None = None) -> None:
        # Any directory directly under the scratch area is some step's workspace.
        self._scratch = re.compile(re.escape(str(scratch_dir)) + r"/[^/\s\"']+") if scratch_dir else None

    def normalise(self, value: JsonValue) -> JsonValue:
        if isinstance(value, str):
            if self._scratch is not None:
                value = self._scratch.sub("<scratch>", value)
            value = _ANY_SCRATCH.sub("<scratch>", value)
            return _TIMING_TEXT.sub("<time>", value)
        if isinstance(value, dict):
            return {
                k: "<time>"
                if _TIMING_KEYS.search(str(k)) and isinstance(v, int | float)
                else self.normalise(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.normalise(v) for v in value]
        return value

    def diverges(self, recorded: Entry, replayed: Entry, *, step_id: str, role: str) -> Divergence | None:
        """A divergence when the outcome or the (normalised) result differs, else None."""
        if recorded.outcome != replayed.outcome:
            what = f"the tool {recorded.outcome} when recorded and {replayed.outcome} now"
        elif _canonical(before := self.normalise(recorded.result)) != _canonical(
            after := self.normalise(replayed.result)
        ):
            what = "the tool's result differs" + _where(before, after)
        else:
            return None
        return Divergence(
            step_id=step_id,
            role=role,
            request=replayed.request,
            tool=replayed.tool,
            tool_call_id=replayed.tool_call_id,
            what=what,
            recorded=excerpt(recorded.result),
            replayed=excerpt(replayed.result),
        )


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _where(recorded: object, replayed: object) -> str:
    """Which field differs first, for a person reading the report."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        keys = sorted(set(recorded) | set(replayed))
        changed = [k for k in keys if _canonical(recorded.get(k)) != _canonical(replayed.get(k))]
        if changed:
            return f" (in {', '.join(map(str, changed[:3]))})"
    return ""
