"""The stage kinds: one module per kind, and the registry everything else derives from.

    kind.py      what a kind is (`StageKind`: its request and result types, status, order rules,
                 how it builds its request from the task's record and how its result changes it)
    plan.py  retrieve.py  code.py  review.py  verify.py  select.py  echo.py    the built-in kinds

The kinds are installed under the entry-point group `codeloop.stages` (`NAME = "module:OBJECT"`,
the object a `StageKind`), the built-ins in codeloop's own `pyproject.toml` exactly as a plug-in
declares its own, as roles are under `codeloop.roles` (`agents/runtime/plugins.py`).
`installed_kinds()` is the registry: the state machine reacts to a result through its stage's kind,
the orchestrator's shell takes the results of every installed kind, a role serves an installed
kind, the configuration's stage names are the installed kinds' (`codeloop.config.files`), and
loading a kind registers its request and result with the bus. A new kind is therefore one module
holding one `StageKind` plus its entry point.

A kind declares the status a task shows while its stage runs (`StageKind.statuses`); the task
statuses are open to kinds (`agents.messages.status`), and `known_statuses()` lists the machine's
and the installed kinds' in the order a task meets them (what `codeloop status` and the console
offer to filter by).

A kind that cannot be used — it raises on import, is not a `StageKind`, names itself differently
from its entry point, takes a built-in kind's name, declares a status that is the machine's own
(`done`, `submitted`, ...) or not a lowercase word, or its messages take another's `kind` tag —
is kept as a `BrokenKind` with the reason, and the others load as if it were not there.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import ClassVar, get_args

from agents.errors import AgentError
from agents.messages import MACHINE_STATUSES, EndStatus, status_problem
from agents.orchestrator.stages.kind import StageKind
from bus.messages import DuplicateKind, Message, register_payloads

log = logging.getLogger("codeloop.orchestrator")
ENTRY_POINT_GROUP = "codeloop.stages"
BUILTIN_DISTRIBUTION = "codeloop"
BUILTIN_KINDS = ("plan", "retrieve", "code", "review", "verify", "echo", "select")
"""Names only codeloop itself may install a kind under, in the order kinds are listed."""


@dataclass(frozen=True)
class BrokenKind:
    name: str
    entry_point: str
    distribution: str
    reason: str


@dataclass(frozen=True)
class KindRegistry:
    kinds: dict[str, StageKind] = field(default_factory=dict)
    broken: list[BrokenKind] = field(default_factory=list)


class KindsLoading(AgentError):
    """A kind's module asked for the installed kinds while they were being loaded."""

    failure_class: ClassVar[str] = "env.setup"


def load_kinds(found: Iterable[EntryPoint] | None = None) -> KindRegistry:
    """Every kind of the `codeloop.stages` entry points (`found` instead, in tests), built-ins first."""
    points = list(entry_points(group=ENTRY_POINT_GROUP) if found is None else found)
    points.sort(key=_listed_order)
    kinds: dict[str, StageKind] = {}
    broken: list[BrokenKind] = []
    for point in points:
        dist = _distribution(point)
        problem = _problem(point, dist, kinds)
        if isinstance(problem, str):
            broken.append(BrokenKind(point.name, point.value, dist, problem))
            log.warning("stage kind %s (%s, %s) is not usable: %s", point.name, point.value, dist, problem)
            continue
        kinds[point.name] = problem
    return KindRegistry(kinds, broken)


def _problem(point: EntryPoint, dist: str, loaded: dict[str, StageKind]) -> StageKind | str:
    """The kind `point` names, or why it cannot be used."""
    if point.name in BUILTIN_KINDS and dist != BUILTIN_DISTRIBUTION:
        return f"the name clashes with the built-in stage kind {point.name!r}; choose another name"
    if point.name in loaded:
        return f"the name clashes with another installed stage kind {point.name!r}"
    try:
        kind = point.load()
    except Exception as exc:  # a plug-in's import may raise anything
        return f"importing {point.value} raised {type(exc).__name__}: {exc}"
    if not isinstance(kind, StageKind):
        return f"{point.value} is a {type(kind).__name__}, not a StageKind (agents.orchestrator.stages.kind)"
    if kind.name != point.name:
        return f"the entry point is named {point.name!r} but the kind calls itself {kind.name!r}"
    for status in kind.statuses:
        problem = status_problem(status)
        if problem is not None:
            return problem
    try:
        register_payloads(kind.request, kind.result)
    except (DuplicateKind, TypeError) as exc:
        return f"its messages cannot be registered: {exc}"
    return kind


def _listed_order(point: EntryPoint) -> tuple[bool, int, str]:
    """Built-ins first, in pipeline order (so a plug-in taking a built-in's name is the one
    reported), then the plug-ins by name."""
    builtin = _distribution(point) == BUILTIN_DISTRIBUTION
    rank = BUILTIN_KINDS.index(point.name) if builtin and point.name in BUILTIN_KINDS else len(BUILTIN_KINDS)
    return (not builtin, rank, point.name)


def _distribution(point: EntryPoint) -> str:
    dist = getattr(point, "dist", None)
    return dist.name if dist is not None else "(unknown)"


_installed: KindRegistry | None = None
_loading = False


def installed() -> KindRegistry:
    """The installed kinds, loaded once per process.

    Raises:
        KindsLoading: called from a kind's own module while the kinds load (define a role of that
            kind with the `StageKind` object itself, not its name).
    """
    global _installed, _loading
    if _installed is None:
        if _loading:
            raise KindsLoading("the stage kinds are being loaded; name a kind by its StageKind object here")
        _loading = True
        try:
            _installed = load_kinds()
        finally:
            _loading = False
    return _installed


def installed_kinds() -> dict[str, StageKind]:
    """Every installed stage kind by name, built-ins first."""
    return installed().kinds


def stage_kind(name: str) -> StageKind:
    """The installed kind `name`.

    Raises:
        ValueError: no kind of that name is installed (the message lists those that are).
    """
    kind = installed_kinds().get(name)
    if kind is None:
        raise ValueError(f"unknown stage kind {name!r}; known kinds: {', '.join(installed_kinds())}")
    return kind


def known_statuses(kinds: Iterable[StageKind] | None = None) -> tuple[str, ...]:
    """Every status a task may show, in the order a task goes through them: `submitted`, the
    statuses `kinds` declare (default: the installed kinds'), `revising`, then the terminal ones.
    A record may still hold a status of a kind not installed here (`TaskStatus` is open)."""
    kinds = installed_kinds().values() if kinds is None else kinds
    declared = [status for kind in kinds for status in kind.statuses]
    ended: tuple[str, ...] = get_args(EndStatus)
    return tuple(dict.fromkeys([MACHINE_STATUSES[0], *declared, *MACHINE_STATUSES[1:], *ended]))


def result_types() -> tuple[type[Message], ...]:
    """What the installed kinds' stages answer with: what the orchestrator takes besides failures."""
    return tuple(kind.result for kind in installed_kinds().values())


__all__ = [
    "ENTRY_POINT_GROUP",
    "BrokenKind",
    "KindRegistry",
    "StageKind",
    "installed",
    "installed_kinds",
    "known_statuses",
    "load_kinds",
    "result_types",
    "stage_kind",
]
