"""Named pipelines: the built-in ones and those the configuration declares.

The configuration (`codeloop.config.settings`: the repository's `codeloop.toml` or `[tool.codeloop]`
of its `pyproject.toml`, then the user's `config.toml`) names pipelines as lists of `KIND:ROLE`
stages in a `[pipelines]` table:

    [pipelines]
    secure = ["plan:planner", "retrieve:retriever", "code:coder", "review:security-reviewer", "verify:verifier"]

`resolve_pipeline` turns a name into a checked pipeline; `role_problems` says which of its roles
cannot be served (neither installed here nor live on the bus). Both run before a task is
submitted, so a bad pipeline is refused with the reason instead of leaving a task waiting.
"""

from collections.abc import Collection
from pathlib import Path

from agents.orchestrator.pipeline import NAMED, Pipeline, PipelineError, parse_pipeline, stages_of
from agents.runtime.plugins import RoleRegistry, load_roles
from bus.connection import Bus
from bus.discovery import discover, live_roles
from codeloop.config.errors import ConfigError
from codeloop.config.settings import Settings, load_settings
from codeloop.errors import CodeloopError

CONFIG_FILE = "codeloop.toml"


class PipelineConfigError(CodeloopError, ValueError):
    """A configuration file whose `[pipelines]` cannot be read; the message names the file."""


def configured_pipelines(repo: Path, settings: Settings | None = None) -> dict[str, list[str]]:
    """The pipelines the configuration names: `settings`' or, without them, those loaded for `repo`.

    Raises:
        PipelineConfigError: a configuration file that cannot be read or whose pipelines are
            malformed (the message names the file and key).
    """
    if settings is None:
        try:
            settings = load_settings(repo=repo)
        except ConfigError as exc:
            raise PipelineConfigError(str(exc)) from None
    return {name: list(stages) for name, stages in settings.pipelines.items()}


def known_pipelines(repo: Path, settings: Settings | None = None) -> dict[str, list[str]]:
    """Built-in pipelines and the configured ones, by name (a configured one replaces a built-in of its name)."""
    return {**{name: stages_of(p) for name, p in NAMED.items()}, **configured_pipelines(repo, settings)}


def resolve_pipeline(
    name: str, repo: Path, *, mode: str = "write", settings: Settings | None = None
) -> Pipeline:
    """The pipeline `name` as the configuration (or the built-ins) define it, checked.

    Raises:
        PipelineError: an unknown name, or a pipeline with a bad stage or an impossible order.
        PipelineConfigError: the configuration cannot be read.
    """
    configured = configured_pipelines(repo, settings)
    known = {**{n: stages_of(p) for n, p in NAMED.items()}, **configured}
    if name not in known:
        raise PipelineError(
            f"no pipeline named {name!r}; known: {', '.join(sorted(known))} "
            f"(declare one in {repo / CONFIG_FILE} under [pipelines])"
        )
    if name in NAMED and name not in configured:
        return NAMED[name]
    return parse_pipeline(name, known[name], mode=mode)


def role_problems(pipeline: Pipeline, registry: RoleRegistry, live: Collection[str] = ()) -> list[str]:
    """Roles of `pipeline` that nothing can serve: not installed here and no live worker (`live`)."""
    problems = []
    for stage in pipeline.stages:
        if stage.role in live or registry.get(stage.role) is not None:
            installed = registry.get(stage.role)
            if installed is not None and installed.kind != stage.kind:
                problems.append(
                    f"stage {stage.kind}:{stage.role}: the role {stage.role!r} serves {installed.kind} stages, "
                    f"not {stage.kind}"
                )
            continue
        problems.append(
            f"stage {stage.kind}:{stage.role}: {registry.why_missing(stage.role)}, and no live worker has it"
        )
    return problems


async def check_served(bus: Bus, pipeline: Pipeline, registry: RoleRegistry | None = None) -> None:
    """Refuse `pipeline` when one of its roles is neither installed here nor live on `bus`.

    Raises:
        PipelineError: naming each such stage and why.
    """
    registry = registry or load_roles()
    problems = role_problems(pipeline, registry)
    if problems:  # not everything is installed here: maybe a worker elsewhere serves it
        live = live_roles(await discover(bus))
        problems = role_problems(pipeline, registry, live)
    if problems:
        raise PipelineError(f"pipeline {pipeline.name!r} refused: " + "; ".join(problems))


def serving_roles(
    base: tuple[str, ...], pipeline: Pipeline | None, registry: RoleRegistry
) -> tuple[str, ...]:
    """`base` plus the installed roles `pipeline` needs that `base` lacks (a process running a
    whole pipeline by itself, e.g. `codeloop run` without a serve)."""
    if pipeline is None:
        return base
    extra = [s.role for s in pipeline.stages if s.role not in base and registry.get(s.role) is not None]
    return (*base, *dict.fromkeys(extra))
