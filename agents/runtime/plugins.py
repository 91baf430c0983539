"""Finding the installed roles: the entry-point group `codeloop.roles`, built-ins and plug-ins alike.

`load_roles()` loads every entry point of the group. One that cannot be used — it raises on
import, is not a `RoleDefinition` (or a callable returning one), names itself differently from
its entry point, has a handler of the wrong shape, or takes a built-in role's name — is kept as a
`BrokenRole` with the reason, and the others load as if it were not there: a broken plug-in
never stops codeloop or the other roles.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import ClassVar

from agents.errors import AgentError
from agents.runtime.api import ENTRY_POINT_GROUP, RoleDefinition, check_handler

log = logging.getLogger("codeloop.agents")
BUILTIN_DISTRIBUTION = "codeloop"
BUILTIN_NAMES = frozenset({"planner", "retriever", "coder", "verifier", "selector", "echo"})
"""Names only codeloop itself may install a role under."""


@dataclass(frozen=True)
class InstalledRole:
    definition: RoleDefinition
    entry_point: str
    """`module:object` the entry point names."""
    distribution: str
    """The installed package that declares it (`codeloop` for the built-ins)."""

    @property
    def builtin(self) -> bool:
        return self.distribution == BUILTIN_DISTRIBUTION


@dataclass(frozen=True)
class BrokenRole:
    name: str
    entry_point: str
    distribution: str
    reason: str


@dataclass(frozen=True)
class RoleRegistry:
    roles: dict[str, InstalledRole] = field(default_factory=dict)
    broken: list[BrokenRole] = field(default_factory=list)

    def get(self, name: str) -> RoleDefinition | None:
        installed = self.roles.get(name)
        return installed.definition if installed else None

    def without(self, *names: str) -> "RoleRegistry":
        """The registry minus `names` (as if they were not installed)."""
        return RoleRegistry({n: r for n, r in self.roles.items() if n not in names}, list(self.broken))

    def why_missing(self, name: str) -> str:
        """Why `name` cannot run here, for an error message."""
        broken = next((b for b in self.broken if b.name == name), None)
        if broken is not None:
            return f"role {name!r} is installed but broken ({broken.distribution}): {broken.reason}"
        return f"role {name!r} is not installed; installed roles: {', '.join(sorted(self.roles)) or 'none'}"


def load_roles(found: Iterable[EntryPoint] | None = None) -> RoleRegistry:
    """Every role of the `codeloop.roles` entry points (`found` instead, in tests)."""
    points = list(entry_points(group=ENTRY_POINT_GROUP) if found is None else found)
    # Built-ins first, so a plug-in that takes a built-in's name is the one reported.
    points.sort(key=lambda ep: (_distribution(ep) != BUILTIN_DISTRIBUTION, ep.name))
    roles: dict[str, InstalledRole] = {}
    broken: list[BrokenRole] = []
    for point in points:
        dist = _distribution(point)
        try:
            definition = _load(point, dist)
            if point.name in roles:
                raise _Unusable(
                    f"the name clashes with the role {point.name!r} of {roles[point.name].distribution}"
                )
        except _Unusable as exc:
            broken.append(BrokenRole(point.name, point.value, dist, str(exc)))
            log.warning("role %s (%s, %s) is not usable: %s", point.name, point.value, dist, exc)
            continue
        roles[point.name] = InstalledRole(definition, point.value, dist)
    return RoleRegistry(roles, broken)


class _Unusable(AgentError):
    """Why one entry point cannot be used; reported by name, never raised past the registry."""

    failure_class: ClassVar[str] = "env.setup"


def _load(point: EntryPoint, dist: str) -> RoleDefinition:
    if point.name in BUILTIN_NAMES and dist != BUILTIN_DISTRIBUTION:
        raise _Unusable(f"the name clashes with the built-in role {point.name!r}; choose another name")
    try:
        loaded = point.load()
    except Exception as exc:  # a plug-in's import may raise anything
        raise _Unusable(f"importing {point.value} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(loaded, RoleDefinition) and callable(loaded):
        try:
            loaded = loaded()
        except Exception as exc:
            raise _Unusable(f"calling {point.value}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(loaded, RoleDefinition):
        raise _Unusable(
            f"{point.value} is a {type(loaded).__name__}, not a RoleDefinition (make it with agents.runtime.api.define_role)"
        )
    if loaded.name != point.name:
        raise _Unusable(f"the entry point is named {point.name!r} but the role calls itself {loaded.name!r}")
    if loaded.handler is not None:
        try:
            check_handler(loaded.name, loaded.handler)
        except TypeError as exc:
            raise _Unusable(str(exc)) from None
    return loaded


def _distribution(point: EntryPoint) -> str:
    dist = getattr(point, "dist", None)
    return dist.name if dist is not None else "(unknown)"
