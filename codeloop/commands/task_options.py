"""The options that describe a task, shared by `codeloop run` and `codeloop submit`, and the one
function that turns them into a checked `TaskSubmitted` (or a usage error saying what is wrong).

The options are the top layer of the configuration (`codeloop.settings`): what they leave out
comes from the environment, the repository's `codeloop.toml` and the user's `config.toml`. Budgets
are range-checked there, not by the option parser, so a bad one is the same one `error:` line
whichever layer set it."""

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
PlannerModelOpt = Annotated[
    str | None, typer.Option("--planner-model", help="The planner's model (env CODELOOP_PLANNER_MODEL).")
]
CoderModelOpt = Annotated[
    str | None, typer.Option("--coder-model", help="The coder's model (env CODELOOP_CODER_MODEL).")
]
MaxStepsOpt = Annotated[
    int | None, typer.Option("--max-steps", help="Model requests, all roles together (at least 1).")
]
MaxRevisionsOpt = Annotated[
    int | None, typer.Option("--max-revisions", help="Revisions after failed verification (0 or more).")
]
TimeoutOpt = Annotated[
    float | None, typer.Option("--timeout", help="Wall-clock deadline in seconds, from submission.")
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
    int | None, typer.Option("--token-budget", help="Input + output tokens, all roles together (at least 1).")
]
CostBudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--cost-budget",
        help="US dollars the task may spend on models, all roles together; every model must be priced "
        "(genai-prices, or a price in the configuration).",
    ),
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
    cost_budget: float | None = None,
    task_id: str | None = None,
    pipeline: str | None = None,
) -> Any:
    """The `TaskSubmitted` these options and the configuration describe (no snapshot yet), checked
    by `codeloop.settings.check_submission`: nothing has started when this fails.

    Raises:
        typer.Exit: (2) after saying what is wrong: an unreadable or oversized text, a missing
            repository, an unknown mode, a malformed configuration file, a model that cannot be
            resolved or called from here, a bad budget, a pipeline that is not declared or cannot
            run (unknown kind, impossible order).
    """
    from pydantic import ValidationError

    from agents.messages import TaskSubmitted
    from bus.validation import MAX_TASK_TEXT_BYTES, submission_problems
    from codeloop.config import ConfigError
    from codeloop.settings import check_submission, flag_values, load_settings

    text = read_text_argument(task, what="task text", max_bytes=MAX_TASK_TEXT_BYTES)
    if not repo.is_dir():
        raise usage_error(f"--repo {repo} is not a directory")
    problems = submission_problems(task_id=task_id, text=text, repo=str(repo.resolve()), mode=mode)
    if problems:
        raise usage_error("; ".join(problems))
    flags = flag_values(
        model=model,
        planner_model=planner_model,
        coder_model=coder_model,
        max_steps=max_steps,
        max_revisions=max_revisions,
        timeout=timeout,
        token_budget=token_budget,
        cost_budget=cost_budget,
    )
    try:
        settings = load_settings(repo=repo, flags=flags)
        submitted = TaskSubmitted(
            text=text,
            repo=str(repo.resolve()),
            mode=mode,  # type: ignore[arg-type]
            budgets=settings.budgets,
            models=settings.models,
            interactive=sys.stdin.isatty(),
            pipeline=_pipeline_choice(pipeline, repo, mode=mode, settings=settings),
        )
        check_submission(submitted, settings=settings)
    except ConfigError as exc:
        raise usage_error(str(exc)) from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise usage_error(f"invalid task: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return submitted


def _pipeline_choice(name: str | None, repo: Path, *, mode: str, settings: Any) -> Any:
    """The checked `PipelineChoice` of `--pipeline` (None without one).

    Raises:
        typer.Exit: (2) an unknown name, an unknown kind or an impossible order.
    """
    if name is None:
        return None
    from agents.orchestrator.pipeline import PipelineError, choice_of
    from codeloop.pipelines import resolve_pipeline

    try:
        return choice_of(resolve_pipeline(name, repo.resolve(), mode=mode, settings=settings))
    except PipelineError as exc:
        raise usage_error(f"--pipeline: {exc}") from None
