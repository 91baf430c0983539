"""Fixed replays of what a real local model emitted: SmolLM2-135M-Instruct behind llama.cpp on the
example project's task (write mode, the coder's loop), recorded once by `test_local_model.py` with
`CODELOOP_SAVE_RECORDINGS=tests/data/local_model` into `tests/data/local_model/`.

What it emitted there: three `git_commit` calls in a row, each with arguments the tool refuses —
branches it may not write (`git-v1`, `checkbox.py`, `master`), paths that do not exist
(`./checkbox.py#345028`, URLs) — each refused and told to the model, until the third consecutive
failure ended the run as `agent.loop` (handed off). Recording it also caught a real
interoperability bug: llama-cpp-python's server refused the second request (HTTP 500) because
the assistant message that carried the first call had `content: null`
(`agents.models.llama_chat.LlamaCppChatModel` now sends an empty string).

The recorded responses are fed back to the loop as they came (`recorded.py`; past the recording,
empty responses), so the loop meets the real model's output exactly, without the model. The
shapes this model did not produce are scripted in `test_model_misbehaviour.py`.
"""

import json
from pathlib import Path

import pytest

from agents.messages import Budgets
from agents.replay.store import load_runs
from codeloop.testing import running_pipeline
from tests.e2e.test_local_model import REPORT, _example

pytestmark = pytest.mark.anyio

DATA = Path(__file__).resolve().parents[1] / "data" / "local_model"
RECORDED = Path(__file__).with_name("recorded.py")
RUN = DATA / "01-code-coder.json"


def _recorded() -> dict:
    return json.loads(RUN.read_text())


def test_the_recording_is_a_real_models_output() -> None:
    """The data is what it claims: SmolLM2's run, its responses with the token counts the server reported."""
    run = _recorded()
    assert run["model"] == "local:SmolLM2-135M-Instruct.Q4_1.gguf"
    responses = [e["response"] for e in run["entries"] if e["kind"] == "model_response"]
    assert responses and all(r["usage"]["input_tokens"] > 0 for r in responses)


async def test_the_real_models_refused_calls_are_told_to_it_and_end_the_task_as_they_did(
    tmp_path: Path,
) -> None:
    """Issue contract: the real model's calls with arguments the tool refuses are answered to it as
    tool errors, counted, and end the task in the classified state they ended it in (`result.json`)."""
    repo = _example(tmp_path)
    recorded = _recorded()
    ended = json.loads((DATA / "result.json").read_text())
    async with running_pipeline(tmp_path / "state", roles=("orchestrator", "coder")) as runner:
        result = await runner.run(
            f"{REPORT}\n\ncoder: {RUN}",
            repo,
            stages=["code:coder"],
            mode="write",
            model=f"function:{RECORDED}:replay",
            budgets=Budgets(max_steps=8, max_revisions=0),
            timeout_s=300,
        )
        [replayed] = await load_runs(runner.bus, result.task_id)
    assert (result.status, result.failure_class) == (ended["status"], ended["failure_class"]), result.report
    assert {role: u["requests"] for role, u in result.usage["by_role"].items()} == ended["requests"]
    want = [(e["tool"], e["outcome"]) for e in recorded["entries"] if e["kind"] == "tool_result"]
    got = [(e.tool, e.outcome) for e in replayed.entries if e.kind == "tool_result"]
    assert got == want
    told = [e.result for e in replayed.entries if e.kind == "tool_result"]
    assert all("permission_denied" in str(t) for t in told), told
