"""The options that describe a task, shared by `codeloop run` and `codeloop submit`, and the one
function that turns them into a checked `TaskSubmitted` (or a usage error saying what is wrong)."""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from codeloop.commands._common import read_text_argument, usage_error

TaskArg = Annotated[str, typer.Argument(help="What to do, in words; @FILE for a file's text, - for stdin.")]
RepoOpt = Annotated[Path, typer.Option("--repo", help="Repository the task is about.")]
ModeOpt = Annotated[
    str, typer.Option("--mode", help="read (answer) | write (patch) | execute (patch, run tests)")
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Model of every LLM role (env CODELOOP_MODEL): a pydantic-ai name or function:PATH.py:NAME.",
    ),
]
PlannerModelOpt = Annotated[str | None, typer.Option("--planner-model", help="The planner's model.")]
CoderModelOpt = Annotated[str | None, typer.Option("--coder-model", help="The coder's model.")]
MaxStepsOpt = Annotated[
    int | None, typer.Option("--max-steps", min=1, help="Model requests, all roles together.")
]
MaxRevisionsOpt = Annotated[
    int | None, typer.Option("--max-revisions", min=0, help="Revisions after failed verification.")
]
TimeoutOpt = Annotated[
    float | None, typer.Option("--timeout", min=1, help="Wall-clock deadline in seconds, from submission.")
]
PipelineOpt = Annotated[
    str | None,
    typer.Option(
        "--pipeline",
        help="Run the task through this named pipeline: a built-in one (fix, explain, diagnose, echo) or "
        "one the repository's codeloop.toml declares under [pipelines] as a list of KIND:ROLE stages. "
        "Default: by the task (diagnose without a model, explain in read mode, else fix).",
    ),
]
TokenBudgetOpt = Annotated[
    int | None, typer.Option("--token-budget", min=1, help="Input + output tokens, all roles together.")
]


def build_task(
    task: str,
    repo: Path,
    *,
    mode: str,
    model: str | None,
    planner_model: str | None,
    coder_model: str | None,
    max_steps: int | None,
    max_revisions: int | None,
    timeout: float | None,
    token_budget: int | None,
    task_id: str | None = None,
    pipeline: str | None = None,
) -> Any:
    """The `TaskSubmitted` these options describe (no snapshot yet).

    Raises:
        typer.Exit: (2) after saying what is wrong: an unreadable or oversized text, a missing
            repository, an unknown mode, a model file that does not exist, a bad budget, a
            pipeline that is not declared or cannot run (unknown kind, impossible order).
    """
    from pydantic import ValidationError

    from agents.messages import Budgets, TaskSubmitted
    from bus.validation import MAX_TASK_TEXT_BYTES, submission_problems
    from codeloop.config import ConfigError, model_names

    text = read_text_argument(task, what="task text", max_bytes=MAX_TASK_TEXT_BYTES)
    if not repo.is_dir():
        raise usage_error(f"--repo {repo} is not a directory")
    problems = submission_problems(task_id=task_id, text=text, repo=str(repo.resolve()), mode=mode)
    if problems:
        raise usage_error("; ".join(problems))
    chosen = None
    if pipeline is not None:
        from agents.orchestrator.pipeline import PipelineError, choice_of
        from codeloop.pipelines import PipelineConfigError, resolve_pipeline

        try:
            chosen = choice_of(resolve_pipeline(pipeline, repo.resolve(), mode=mode))
        except (PipelineError, PipelineConfigError) as exc:
            raise usage_error(f"--pipeline: {exc}") from None
    limits = {"max_steps": max_steps, "max_revisions": max_revisions, "deadline_s": timeout,
              "max_tokens": token_budget}  # fmt: skip
    try:
        return TaskSubmitted(
            text=text, repo=str(repo.resolve()), mode=mode,  # type: ignore[arg-type]
            budgets=Budgets(**{k: v for k, v in limits.items() if v is not None}),
            models=model_names(model=model, planner=planner_model, coder=coder_model),
            interactive=sys.stdin.isatty(), pipeline=chosen,
        )  # fmt: skip
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise usage_error(f"invalid task: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
