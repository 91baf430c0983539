"""The one check of everything a submission names, before anything starts.

`run`, `submit`, `eval`, `config check` and the tasks server's `submit_task` all call it: every
model resolves (provider known, `function:` file and name exist, credentials set), a cost budget
can be priced, a named pipeline is known and can run. A problem is a `ConfigError` naming the
value, where it came from (`Settings.origins`) and the fix.
"""

from collections.abc import Mapping
from pathlib import Path

from agents.messages import ModelOptions, TaskSubmitted
from agents.models.check import ModelNameProblem, check_model_name, declares_priced_as
from agents.orchestrator.pipeline import PipelineError
from codeloop.config.errors import ConfigError
from codeloop.config.pipelines import resolve_pipeline
from codeloop.config.settings import Settings

COST_BUDGET_FLAG = "--cost-budget"


def check_submission(
    task: TaskSubmitted,
    *,
    settings: Settings | None = None,
    pipeline: str | None = None,
    environ: Mapping[str, str] | None = None,
    credentials: bool = True,
) -> None:
    """Check everything `task` names before anything starts: every model resolves (provider known,
    `function:` file and name exist, credentials set in `environ`, default this process's), a cost
    budget can be priced, `pipeline` (if given) is known. `settings` names where each model came from.
    `credentials=False` leaves the credentials to the workers: for a submitter on a remote bus
    whose workers, not it, hold the model keys (a tasks server in its own pod).

    Raises:
        ConfigError: the first problem, naming the value and the fix.
    """
    problems = submission_problems(
        task, settings=settings, pipeline=pipeline, environ=environ, credentials=credentials
    )
    if problems:
        raise ConfigError(problems[0])


def submission_problems(
    task: TaskSubmitted,
    *,
    settings: Settings | None = None,
    pipeline: str | None = None,
    environ: Mapping[str, str] | None = None,
    credentials: bool = True,
) -> list[str]:
    """Every problem `check_submission` would raise the first of, in order."""
    problems: list[str] = []
    names = task.models.all_names()
    for name in names:
        try:
            check_model_name(name, environ=environ, credentials=credentials)
        except ModelNameProblem as exc:
            problems.append(f"{exc}{_set_by(settings, name)}")
    if task.budgets.max_cost_usd is not None:
        budget = _cost_budget_named(settings)
        for name in names:
            if not is_priced(name, task.models.options.get(name)):
                problems.append(
                    f"{budget} needs a price for every model, and {name!r} has none{_set_by(settings, name)}: "
                    f'set input_usd_per_mtok and output_usd_per_mtok under [model_settings."{name}"], '
                    "or drop the cost budget"
                )
    if pipeline is not None:
        try:
            resolve_pipeline(pipeline, Path(task.repo), mode=task.mode, settings=settings or Settings())  # pyright: ignore[reportCallIssue] - task is a TaskSubmitted whose models and budgets have defaults
        except PipelineError as exc:
            problems.append(str(exc))
    return problems


def _cost_budget_named(settings: Settings | None) -> str:
    """How the cost budget is named in a message: as the option or argument that set it (the
    tasks server's `cost_budget_usd`), else as the command line's flag."""
    origin = settings.origins.get("budgets.max_cost_usd") if settings is not None else None
    if origin is not None and origin.source == "flag" and origin.where:
        return origin.where
    return COST_BUDGET_FLAG


def _set_by(settings: Settings | None, name: str) -> str:
    """` (models.coder, from FILE)`: where the name that failed came from, when known."""
    if settings is None:
        return ""
    for key, origin in settings.origins.items():
        if not key.startswith("models.") or origin.source == "default":
            continue
        chain = settings.models.chain_for(key.removeprefix("models."))
        if chain is not None and name in chain.names:
            if origin.source in ("flag", "environment"):
                return f" (from {origin.where})"
            return f" ({key} in {origin.where})"
    return ""


_GENAI_PROVIDERS = {"openai-chat": "openai", "openai-responses": "openai", "google-gla": "google"}


def is_priced(name: str, options: ModelOptions | None) -> bool:
    """True when a request of `name` can be priced: a configured price, or genai-prices knows it."""
    if options is not None and options.priced:
        return True
    provider, sep, model = name.partition(":")
    if provider == "local":
        return True  # run on this machine: free (agents.models.local)
    if provider == "function":
        return declares_priced_as(name)
    if not sep or provider == "replay" or name == "test":
        return False
    # Only for a cost budget: genai-prices loads its whole price table on import (a second).
    from genai_prices import Usage, calc_price

    try:
        calc_price(
            Usage(input_tokens=1, output_tokens=1),
            model,
            provider_id=_GENAI_PROVIDERS.get(provider, provider),
        )
    except LookupError:
        return False
    return True
