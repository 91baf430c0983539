"""What counts as a divergence between a recorded and a replayed tool observation, and what a
recording keeps out (the replay's comparison and redaction seam, without a bus)."""

from pathlib import Path

from pydantic import JsonValue

from agents.replay.compare import Comparer
from agents.replay.model import Entry, scrub


def _entry(result: JsonValue, outcome: str = "ok") -> Entry:
    return Entry(
        seq=1,
        request=1,
        kind="tool_result",
        tool="run_tests",
        tool_call_id="c1",
        outcome=outcome,  # pyright: ignore[reportArgumentType] - outcome is one of the literals, given by each test
        result=result,
    )


def test_scratch_paths_and_timings_are_not_divergences_but_content_is() -> None:
    """Two runs of one tool on one tree differ in their workspace path and timings only; those are
    masked, any other difference is reported with the field it is in."""
    comparer = Comparer(scratch_dir=Path("/home/u/.codeloop/work"))
    recorded = _entry(
        {
            "summary": "1 passed in 0.12s",
            "duration_s": 0.8,
            "log": "/home/u/.codeloop/work/t1-code-aa11bb22/tests ok",
        }
    )
    again = _entry(
        {
            "summary": "1 passed in 0.31s",
            "duration_s": 1.4,
            "log": "/home/u/.codeloop/work/t2-code-cc33dd44/tests ok",
        }
    )
    assert comparer.diverges(recorded, again, step_id="03-code", role="coder") is None
    assert isinstance(again.result, dict)
    changed = _entry({**again.result, "summary": "1 failed in 0.31s"})
    divergence = comparer.diverges(recorded, changed, step_id="03-code", role="coder")
    assert divergence is not None and divergence.what == "the tool's result differs (in summary)"
    assert (
        divergence.tool == "run_tests"
        and "1 failed" in divergence.replayed
        and "1 passed" in divergence.recorded
    )


def test_a_run_recorded_by_one_worker_matches_its_replay_on_another() -> None:
    """Each worker has its own home, so the replaying worker's scratch area is not the recording
    one's: both workspaces are masked, while a path that is no scratch workspace still counts."""
    comparer = Comparer(scratch_dir=Path("/srv/b/.codeloop/work"))
    recorded = _entry({"log": "/srv/a/home/work/t1-code-aa11bb22/tests ok"})
    replayed = _entry({"log": "/srv/b/.codeloop/work/t1-code-cc33dd44/tests ok"})
    assert comparer.diverges(recorded, replayed, step_id="03-code", role="coder") is None
    other = _entry({"log": "/srv/a/home/work/project/tests ok"})
    assert comparer.diverges(other, replayed, step_id="03-code", role="coder") is not None


def test_a_tool_that_now_refuses_is_a_divergence() -> None:
    """The same result text with another outcome (returned, then refused) is reported."""
    divergence = Comparer().diverges(_entry("x"), _entry("x", "retried"), step_id="03-code", role="coder")
    assert divergence is not None and "ok when recorded and retried now" in divergence.what


def test_recordings_keep_secrets_out() -> None:
    """Every string of a recording passes the redaction seam, however deep in the JSON it is."""
    clean = scrub(
        {"args": {"content": "OPENAI_API_KEY=sk-abcdefghijklmnop\n"}, "list": ["Bearer abcdefghijkl"]}
    )
    assert "sk-abcdefghijklmnop" not in str(clean) and "abcdefghijkl" not in str(clean)
    args = clean["args"]
    assert isinstance(args, dict) and "[redacted]" in str(args["content"])
