"""`TaskOptions`: the options a task is submitted with, each named once for every entry point.

A task's options are its models, its pipeline and its budgets. Each field says how it is spelled
where it is given (`Spelling`): the command-line flag of `codeloop run`, `submit` and `eval`
(`codeloop.cli.task_options` makes the typer options of them), the configuration key it sets
(`codeloop.config.settings`: the options are the top layer of the configuration, `layer()`), and
the argument of the tasks server's `submit_task` (`arguments_model()` is that tool's input, handed
to the server through its backend, `codeloop.services.tasks_backend`). The range of a budget is
checked once, where the configuration is merged (`Budgets`), whichever layer set it; the tool's
schema states the same range.

This lives in the configuration package rather than in `agents`: what reaches the agents is the
resolved `TaskSubmitted` (its `ModelNames`, `Budgets` and pipeline), and these options are only
the top layer of the configuration that resolution reads; their names (flag, configuration key,
tool argument) belong to codeloop's command line, files and tasks server, none to the agents.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, create_model
from pydantic.fields import FieldInfo

OptionValue = str | int | float | bool
"""The value of one task option as given (every field of `TaskOptions` is one, or None)."""

Naming = Literal["flag", "argument"]
"""Which name of an option a message uses: the command line's flag or `submit_task`'s argument."""


@dataclass(frozen=True)
class Spelling:
    """How one task option is named where it is given."""

    flag: str
    """The command-line flag (`--max-steps`)."""
    key: str | None
    """The configuration key it sets (`budgets.max_steps`); None when it is no configuration value."""
    argument: str
    """The tasks server's `submit_task` argument (`max_steps`)."""
    help: str
    """What the flag's `--help` says."""
    key_value: Mapping[OptionValue, JsonValue] | None = None
    """How the option's value is spelled in the configuration, when not as given (a flag `True`
    sets `[verification] require = "passed"`)."""

    def name(self, naming: Naming) -> str:
        return self.flag if naming == "flag" else self.argument


PIPELINE_HELP = (
    "Run the task through this named pipeline: a built-in one (fix, explain, diagnose, echo) or one the "
    "repository's codeloop.toml declares under [pipelines] as a list of KIND:ROLE stages. Default: by the "
    "task (diagnose without a model, explain in read mode, else fix)."
)


class TaskOptions(BaseModel):
    """A task's models, pipeline and budgets as given (None: the configuration decides)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    model: Annotated[
        str | None,
        Spelling(
            "--model",
            "models.default",
            "model",
            "Model of every LLM role (env CODELOOP_MODEL): a pydantic-ai name or function:PATH.py:NAME.",
        ),
    ] = None
    """Model of every LLM role: a pydantic-ai name (`openai-chat:...`, `anthropic:...`) or
    `function:PATH.py:NAME`. None: the configured default (CODELOOP_MODEL); no model at all runs
    the task in diagnose mode."""
    planner_model: Annotated[
        str | None,
        Spelling(
            "--planner-model",
            "models.planner",
            "planner_model",
            "The planner's model (env CODELOOP_PLANNER_MODEL).",
        ),
    ] = None
    """The planner's model, overriding `model`."""
    coder_model: Annotated[
        str | None,
        Spelling(
            "--coder-model", "models.coder", "coder_model", "The coder's model (env CODELOOP_CODER_MODEL)."
        ),
    ] = None
    """The coder's model, overriding `model`."""
    max_steps: Annotated[
        int | None,
        Spelling(
            "--max-steps",
            "budgets.max_steps",
            "max_steps",
            "Model requests, all roles together (at least 1).",
        ),
    ] = None
    """Model requests, all roles together."""
    max_revisions: Annotated[
        int | None,
        Spelling(
            "--max-revisions",
            "budgets.max_revisions",
            "max_revisions",
            "Revisions after failed verification (0 or more).",
        ),
    ] = None
    """Revisions after failed verification."""
    timeout: Annotated[
        float | None,
        Spelling(
            "--timeout", "budgets.deadline_s", "timeout_s", "Wall-clock deadline in seconds, from submission."
        ),
    ] = None
    """The task's wall-clock deadline in seconds, from submission."""
    token_budget: Annotated[
        int | None,
        Spelling(
            "--token-budget",
            "budgets.max_tokens",
            "token_budget",
            "Input + output tokens, all roles together (at least 1).",
        ),
    ] = None
    """Input + output tokens, all roles together."""
    cost_budget: Annotated[
        float | None,
        Spelling(
            "--cost-budget",
            "budgets.max_cost_usd",
            "cost_budget_usd",
            "US dollars the task may spend on models, all roles together; every model must be priced "
            "(genai-prices, or a price in the configuration).",
        ),
    ] = None
    """US dollars the task may spend on models, all roles together; every model must have a price
    (genai-prices knows it, or the configuration sets one)."""
    attempts: Annotated[
        int | None,
        Spelling(
            "--attempts",
            "budgets.attempts",
            "attempts",
            "Candidates the coder makes, each from the starting tree and verified against it; above 1 "
            "a select stage chooses one (the other budgets bind over all attempts together).",
        ),
    ] = None
    """Candidates the coder makes, each verified against the starting tree; above 1 a `select`
    stage chooses one. The other budgets bind over all attempts together."""
    require_verified: Annotated[
        bool | None,
        Spelling(
            "--require-verified",
            "verification.require",
            "require_verified",
            "End the task handed_off (exit 3, verify.unverified) rather than done when no test checked "
            "the patch (verdict unverified); for scripts and CI that must not take an unchecked patch.",
            key_value={True: "passed", False: None},
        ),
    ] = None
    """Refuse an unverified patch: a task whose verification is `unverified` ends `handed_off`
    with `verify.unverified`. Sets `[verification] require = "passed"`."""
    no_instructions: Annotated[
        bool | None,
        Spelling(
            "--no-instructions",
            None,
            "no_instructions",
            "Leave out the project's instructions (AGENTS.md files of the repository and your own).",
        ),
    ] = None
    """Leave out the project's instructions: the repository's `AGENTS.md` files and the user's own."""
    pipeline: Annotated[str | None, Spelling("--pipeline", None, "pipeline", PIPELINE_HELP)] = None
    """A named pipeline: a built-in one (fix, explain, diagnose, echo) or one the configuration
    declares under [pipelines]; None: chosen by the task."""

    @classmethod
    def spellings(cls) -> dict[str, Spelling]:
        """Field name -> its spelling, in the fields' order."""
        return {name: _spelling(info) for name, info in cls.model_fields.items()}

    def layer(self, naming: Naming = "flag") -> dict[str, tuple[JsonValue, str]]:
        """The configuration's top layer these options make: key -> (value, the flag or argument
        that set it). Options not given, and the pipeline (no configuration value), are left out."""
        layer: dict[str, tuple[JsonValue, str]] = {}
        for name, spelling in self.spellings().items():
            value = getattr(self, name)
            if spelling.key_value is not None and value is not None:
                value = spelling.key_value.get(value)
            if spelling.key is not None and value is not None:
                layer[spelling.key] = (value, spelling.name(naming))
        return layer

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, JsonValue]) -> "TaskOptions":
        """The options `submit_task`'s arguments give (by argument name; others are not options)."""
        by_argument = {spelling.argument: name for name, spelling in cls.spellings().items()}
        return cls.model_validate(
            {by_argument[arg]: value for arg, value in arguments.items() if arg in by_argument}
        )

    @classmethod
    def arguments_model(cls) -> type[BaseModel]:
        """`submit_task`'s task options as a model: one optional field per option, named by its
        argument, described by the option's docstring, in the range its configuration key allows."""
        fields: dict[str, Any] = {}  # create_model's (annotation, FieldInfo) pairs; an annotation may be None
        for name, spelling in cls.spellings().items():
            info = cls.model_fields[name]
            limits = _budget_field(spelling.key)
            merged = FieldInfo.merge_field_infos(
                *([limits] if limits is not None else []), default=None, description=info.description
            )
            fields[spelling.argument] = (info.annotation, merged)
        config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
        return create_model("TaskOptionArguments", __config__=config, **fields)

    @classmethod
    def named_in(cls, message: str, naming: Naming) -> str | None:
        """The option a configuration error is about, by its `naming` name: the one the message
        starts with (`max_steps: ...`) or says a value came from (`(from coder_model)`)."""
        for spelling in cls.spellings().values():
            named = spelling.name(naming)
            if message.startswith(f"{named}:") or f"(from {named})" in message:
                return named
        return None


def _spelling(info: FieldInfo) -> Spelling:
    return next(m for m in info.metadata if isinstance(m, Spelling))


def _budget_field(key: str | None) -> FieldInfo | None:
    """The `Budgets` field a `budgets.*` key names (its range), else None."""
    # Here, not at the top: the command line imports this module to build its flags before
    # `--help` prints, and the agents' messages import nats (a third of a second).
    from agents.messages import Budgets

    section, _, name = (key or "").partition(".")
    return Budgets.model_fields.get(name) if section == "budgets" else None
