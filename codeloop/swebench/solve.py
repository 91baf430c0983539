"""`--model M`: codeloop solves each instance first, through the normal agent pipeline (as
`codeloop eval` runs tasks: one bus, N tasks at once; the command line gives the serve, the local
one or one it starts with every role), and
the patch each task ends with becomes that instance's prediction, in SWE-bench's format, in
`OUT/predictions.jsonl` (written after each instance, atomically). The predictions are then
graded like any predictions file.

Each task is the instance's problem statement, in write mode, on a scratch copy of the repository
at the base commit (the tests of the test patch are not there: the model sees what a SWE-bench
model sees). A task that ends without a patch is an empty prediction.
"""

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bus.config import BusConfig
from codeloop.swebench.instances import Instance
from codeloop.swebench.predictions import Prediction, write_predictions
from codeloop.swebench.repositories import RepoSource, materialise

if TYPE_CHECKING:
    from codeloop.config.settings import Settings


def model_settings(model: str) -> "Settings":
    """The settings of a run with `model` for every LLM role (checked as `codeloop eval` checks).

    Raises:
        ConfigError: the model cannot be resolved (unknown provider, missing file or credentials).
    """
    from codeloop.config.checks import check_submission
    from codeloop.config.task_builder import make_task, task_settings
    from codeloop.config.task_options import TaskOptions

    settings = task_settings(TaskOptions(model=model))
    check_submission(make_task("swebench", Path.cwd(), settings=settings), settings=settings)
    return settings


async def solve(
    instances: list[Instance],
    sources: dict[str, RepoSource],
    *,
    model: str,
    settings: "Settings",
    config: BusConfig,
    out: Path,
    jobs: int,
    done: dict[str, Prediction] | None = None,
) -> dict[str, Prediction]:
    """Run one task per instance not in `done` (made by an earlier, resumed run) on the serve
    `config` connects to, and return every prediction (also in `out/predictions.jsonl`)."""
    from agents.messages import TaskSubmitted
    from codeloop.config.task_builder import make_task
    from codeloop.evaluation.runner import Outcome as TaskOutcome
    from codeloop.evaluation.runner import run_tasks
    from codeloop.evaluation.taskset import EvalTask

    predictions: dict[str, Prediction] = dict(done or {})
    instances_to_solve = [i for i in instances if i.instance_id not in predictions]
    await anyio.Path(out).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="codeloop-swebench-solve-") as scratch:
        bases = Path(scratch) / "bases"
        tasks = []
        for instance in instances_to_solve:
            base = bases / instance.instance_id
            await anyio.to_thread.run_sync(materialise, sources[instance.repo], instance.base_commit, base)
            await anyio.to_thread.run_sync(lambda b=base: shutil.rmtree(b / ".git"))
            tasks.append(
                EvalTask(
                    id=instance.instance_id,
                    repo=str(base),
                    kind="fix",
                    mode="write",
                    text=instance.problem_statement,
                )
            )

        def submit(task: EvalTask, repo: Path) -> TaskSubmitted:
            return make_task(task.text, repo, settings=settings, mode=task.mode)

        async def on_done(outcome: TaskOutcome) -> None:
            patch = (outcome.result.patch or "") if outcome.result is not None else ""
            predictions[outcome.task.id] = Prediction(
                instance_id=outcome.task.id, model_name_or_path=model, model_patch=patch
            )
            ordered = [predictions[i.instance_id] for i in instances if i.instance_id in predictions]
            await anyio.to_thread.run_sync(write_predictions, out / "predictions.jsonl", ordered)

        await run_tasks(
            tasks,
            config=config,
            submit=submit,
            scratch=Path(scratch) / "tasks",
            jobs=jobs,
            on_done=on_done,
        )
    return predictions
