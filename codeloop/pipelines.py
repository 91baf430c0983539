"""Named pipelines: the built-in ones and those a repository's configuration declares.

A repository names pipelines as lists of `KIND:ROLE` stages in a top-level `[pipelines]` table of
`codeloop.toml` at its root, or in `[tool.codeloop.pipelines]` of its `pyproject.toml`:

    [pipelines]
    secure = ["plan:planner", "retrieve:retriever", "code:coder", "review:security-reviewer", "verify:verifier"]

`resolve_pipeline` turns a name into a checked pipeline; `role_problems` says which of its roles
cannot be served (neither installed here nor live on the bus). Both run before a task is
submitted, so a bad pipeline is refused with the reason instead of leaving a task waiting.
"""

import tomllib
from collections.abc import Collection
from pathlib import Path

from agents.orchestrator.pipeline import NAMED, Pipeline, PipelineError, parse_pipeline, stages_of
from agents.plugins import RoleRegistry
from codeloop.errors import CodeloopError

CONFIG_FILE = "codeloop.toml"


class PipelineConfigError(CodeloopError, ValueError):
    """A configuration file whose `[pipelines]` cannot be read; the message names the file."""


def configured_pipelines(repo: Path) -> dict[str, list[str]]:
    """The pipelines `repo`'s configuration names (`codeloop.toml` first, then `pyproject.toml`).

    Raises:
        PipelineConfigError: a file that is not TOML, or a pipeline that is not a list of strings.
    """
    found: dict[str, list[str]] = {}
    for path, keys in ((repo / "pyproject.toml", ("tool", "codeloop", "pipelines")), (repo / CONFIG_FILE, ("pipelines",))):
        if not path.is_file():
            continue
        try:
            table: object = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise PipelineConfigError(f"{path}: cannot read it as TOML: {exc}") from None
        for key in keys:
            table = table.get(key, {}) if isinstance(table, dict) else {}
        if not isinstance(table, dict):
            raise PipelineConfigError(f"{path}: {'.'.join(keys)} must be a table of NAME = [\"KIND:ROLE\", ...]")
        for name, stages in table.items():
            if not isinstance(stages, list) or not all(isinstance(s, str) for s in stages):
                raise PipelineConfigError(
                    f"{path}: pipeline {name!r} must be a list of \"KIND:ROLE\" strings, got {stages!r}"
                )
            found[name] = list(stages)  # codeloop.toml, read last, wins over pyproject.toml
    return found


def known_pipelines(repo: Path) -> dict[str, list[str]]:
    """Built-in pipelines and `repo`'s, by name (a configured one replaces a built-in of its name)."""
    return {**{name: stages_of(p) for name, p in NAMED.items()}, **configured_pipelines(repo)}


def resolve_pipeline(name: str, repo: Path, *, mode: str = "write") -> Pipeline:
    """The pipeline `name` as `repo`'s configuration (or the built-ins) define it, checked.

    Raises:
        PipelineError: an unknown name, or a pipeline with a bad stage or an impossible order.
        PipelineConfigError: the configuration cannot be read.
    """
    known = known_pipelines(repo)
    if name not in known:
        raise PipelineError(
            f"no pipeline named {name!r}; known: {', '.join(sorted(known))} "
            f"(declare one in {repo / CONFIG_FILE} under [pipelines])"
        )
    if name in NAMED and name not in configured_pipelines(repo):
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
        problems.append(f"stage {stage.kind}:{stage.role}: {registry.why_missing(stage.role)}, and no live worker has it")
    return problems


async def check_served(bus: object, pipeline: Pipeline, registry: RoleRegistry | None = None) -> None:
    """Refuse `pipeline` when one of its roles is neither installed here nor live on `bus`.

    Raises:
        PipelineError: naming each such stage and why.
    """
    from agents.plugins import load_roles
    from bus.discovery import discover, live_roles

    registry = registry or load_roles()
    problems = role_problems(pipeline, registry)
    if problems:  # not everything is installed here: maybe a worker elsewhere serves it
        live = live_roles(await discover(bus))  # type: ignore[arg-type]
        problems = role_problems(pipeline, registry, live)
    if problems:
        raise PipelineError(f"pipeline {pipeline.name!r} refused: " + "; ".join(problems))


def serving_roles(base: tuple[str, ...], pipeline: Pipeline | None, registry: RoleRegistry) -> tuple[str, ...]:
    """`base` plus the installed roles `pipeline` needs that `base` lacks (a process running a
    whole pipeline by itself, e.g. `codeloop run` without a serve)."""
    if pipeline is None:
        return base
    extra = [s.role for s in pipeline.stages if s.role not in base and registry.get(s.role) is not None]
    return (*base, *dict.fromkeys(extra))
