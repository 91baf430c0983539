"""Fixed replays of what a real local model emitted: SmolLM2-135M-Instruct behind llama.cpp, on the
example project's task (write mode), recorded once by `test_local_model.py` with
`CODELOOP_SAVE_RECORDINGS=tests/data/local_model` into `tests/data/local_model/`.

The recorded responses are fed back to the loop as they came (`recorded.py`), so the loop meets
the real model's output exactly — without the model, llama.cpp or its speed — and must end the
task as it ended then. `test_model_misbehaviour.py` scripts the shapes this model did not produce.
"""

import json
from pathlib import Path

import pytest

from agents.messages import Budgets
from codeloop.testing import running_pipeline
from tests.e2e.test_local_model import REPORT, _example
from tests.support.shapes import SHAPES, shapes_of

pytestmark = pytest.mark.anyio

DATA = Path(__file__).resolve().parents[1] / "data" / "local_model"
RECORDED = Path(__file__).with_name("recorded.py")
RUNS = sorted(DATA.glob("*-*.json"))
ENDED = json.loads((DATA / "result.json").read_text()) if (DATA / "result.json").exists() else {}

PRODUCED = {shape for run in RUNS for shape in shapes_of(json.loads(run.read_text()))}
"""The shapes the real model produced in the recorded run."""


def test_the_recording_holds_real_misbehaviour_of_named_shapes() -> None:
    """The data is what it claims: a real model's runs, with at least one misbehaving shape."""
    assert RUNS, f"no recordings in {DATA}"
    runs = [json.loads(p.read_text()) for p in RUNS]
    assert all(r["model"].startswith("local:") and r["model"].endswith(".gguf") for r in runs)
    assert PRODUCED and PRODUCED <= set(SHAPES)


@pytest.mark.slow  # the whole pipeline: retrieval embeds the example, the verifier runs its tests
async def test_the_real_models_recorded_output_ends_the_task_as_it_did(tmp_path: Path) -> None:
    """Issue contract: the real model's outputs, replayed, meet the same answers and end the task in
    the same classified state with the same requests counted: each shape in `PRODUCED` is handled."""
    repo = _example(tmp_path)
    lines = [f"{json.loads(p.read_text())['role']}: {p}" for p in RUNS]
    async with running_pipeline(tmp_path / "state") as runner:
        result = await runner.run(
            REPORT + "\n\n" + "\n".join(lines),
            repo,
            mode="write",
            model=f"function:{RECORDED}:replay",
            budgets=Budgets(max_steps=6, max_revisions=0, deadline_s=900),
            timeout_s=900,
        )
    assert (result.status, result.failure_class) == (ENDED["status"], ENDED["failure_class"]), result.report
    requests = {role: u["requests"] for role, u in result.usage["by_role"].items()}
    assert requests == ENDED["requests"]
