"""The submission form: what it offers (repositories under the root, modes the grant allows, the
configured pipelines and models, budgets) and how its values become a submission.

The values are checked by the tasks server's own model of the task options
(`TaskOptions.arguments_model()`, the `submit_task` arguments) and then by the same submission
check `codeloop submit` and the tasks server run (`codeloop.services.tasks_backend.check_submission`).
"""

from typing import TypedDict

from codeloop.config.errors import ConfigError
from codeloop.config.pipelines import PipelineConfigError, known_pipelines
from codeloop.config.settings import load_settings
from codeloop.console.access import Grant
from codeloop.console.tasks import MODE_SCOPES, ConsoleTasks

MODES = (
    ("read", "an answer only"),
    ("write", "a patch"),
    ("execute", "a patch checked by running the tests"),
)
BUDGETS = (
    ("max_steps", "Max model requests", "1"),
    ("max_revisions", "Max revisions", "1"),
    ("timeout_s", "Deadline (s)", "any"),
    ("token_budget", "Token budget", "1"),
)
OPTIONS = ("model", "pipeline", *(name for name, _, _ in BUDGETS))


class FormContext(TypedDict):
    """What `templates/submit.html` is rendered with."""

    root: str
    repositories: list[str]
    modes: tuple[tuple[str, str], ...]
    allowed_modes: list[str]
    pipelines: list[tuple[str, list[str]]]
    """Pipeline name -> its stages, by name."""
    models: list[str]
    default_model: str | None
    budgets: tuple[tuple[str, str, str], ...]
    """(option, label, the input's minimum) of each budget."""
    values: dict[str, str]
    """What the form's fields hold (a refused submission's values again)."""


class SubmitForm:
    def __init__(self, tasks: ConsoleTasks) -> None:
        self.tasks = tasks

    def context(self, grant: Grant, values: dict[str, str] | None = None) -> FormContext:
        """What `templates/submit.html` shows, with `values` (a refused submission's) filled in again."""
        root = self.tasks.root
        try:
            settings = load_settings(repo=root)
            pipelines = sorted(known_pipelines(root, settings).items())
            configured = settings.models
        except (ConfigError, PipelineConfigError):
            pipelines, configured = [], None
        models = []
        if configured is not None:
            models = [m for m in (configured.default, configured.planner, configured.coder) if m]
        return {
            "root": str(root),
            "repositories": self.tasks.repositories(),
            "modes": MODES,
            "allowed_modes": [m for m, _ in MODES if MODE_SCOPES[m] in grant.scopes],
            "pipelines": pipelines,
            "models": sorted(set(models)),
            "default_model": configured.default if configured is not None else None,
            "budgets": BUDGETS,
            "values": {"mode": "read", "repo": ".", **(values or {})},
        }

    async def submit(self, grant: Grant, values: dict[str, str]) -> str:
        """Submit the form's `values`; the new task's id.

        Raises:
            Refused: what the submission check refused, naming the field.
            ValidationError: a value of the wrong type or out of range.
        """
        given = {k: values[k].strip() for k in OPTIONS if values.get(k, "").strip()}
        options = self.tasks.backend.task_options.model_validate(given)
        chosen = {k: v for k, v in options.model_dump().items() if v is not None}
        return await self.tasks.submit(
            grant,
            text=values.get("task", ""),
            repo=values.get("repo", "."),
            mode=values.get("mode", "read"),
            options=chosen,
        )
