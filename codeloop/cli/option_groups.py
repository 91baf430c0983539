"""Typed option groups: a command takes one typed object where its command line has many options.

typer has no option groups: every option is a parameter of the command function, and a command
with twenty options is a function with twenty parameters. `with_option_groups` lets a command
declare one parameter per group instead and expands it, in place, into the group's options for
typer; when the command runs, the group's values are handed to it built into one object. So
`--help` lists the same options in the same order, and the command body sees `mcp.root`, not
`mcp_root` among twenty others.

A parameter is a group when its annotation is an `OptionGroup` subclass (a frozen dataclass whose
fields are `Annotated[T, typer.Option(...)]` with defaults), or is `Annotated[T, EXPANSION]` where
EXPANSION says how to offer and build it (`codeloop.cli.task_options.TaskFlags` offers
`TaskOptions`; `codeloop.cli.connection.Connection` the NATS connection options). An expansion
may place some of its options after another parameter (`after`), so that a group's options keep
their place in `--help` when another option sits between them.
"""

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import ClassVar, Protocol, TypeVar

KEYWORD = inspect.Parameter.KEYWORD_ONLY


class Expansion(Protocol):
    """How one group is offered on the command line and built from what was given."""

    after: Mapping[str, str]
    """Option name -> the parameter it follows (default: in the group's place)."""

    def parameters(self) -> list[inspect.Parameter]:
        """The group's options, as typer parameters, in order."""
        ...

    def build(self, values: Mapping[str, object]) -> object:
        """The group's value from its options' values (by parameter name)."""
        ...


class OptionGroup:
    """Base of a group of options: subclass it as a frozen dataclass whose fields are typer options.

    Validation that needs more than one option, or what the options stand for, goes in methods
    of the subclass; the command calls them once.
    """

    after: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def parameters(cls) -> list[inspect.Parameter]:
        hints = typing.get_type_hints(cls, include_extras=True)
        return [
            inspect.Parameter(field.name, KEYWORD, default=field.default, annotation=hints[field.name])
            for field in dataclasses.fields(cls)  # type: ignore[arg-type] - cls is a dataclass type, checked by the caller
        ]

    @classmethod
    def build(cls, values: Mapping[str, object]) -> object:
        return cls(**values)


_Returned = TypeVar("_Returned")


def with_option_groups(command: Callable[..., _Returned]) -> Callable[..., _Returned]:
    """`command` as typer sees it: each group parameter replaced by the group's options (see the
    module docstring); when it runs, each group is built from its options and passed as one value.

    Raises:
        TypeError: two options of one name, or an option placed after a parameter that is not there.
    """
    expansions: dict[str, tuple[Expansion, list[str]]] = {}
    placed: list[inspect.Parameter] = []
    moved: dict[str, list[inspect.Parameter]] = {}
    signature = inspect.signature(command)
    for parameter in signature.parameters.values():
        expansion = _expansion(parameter.annotation)
        if expansion is None:
            placed.append(parameter.replace(kind=KEYWORD))
            continue
        options = expansion.parameters()
        expansions[parameter.name] = (expansion, [option.name for option in options])
        for option in options:
            anchor = expansion.after.get(option.name)
            (moved.setdefault(anchor, []) if anchor else placed).append(option)
    ordered: list[inspect.Parameter] = []
    for parameter in placed:
        ordered += [parameter, *moved.pop(parameter.name, [])]
    if moved:
        raise TypeError(f"{command.__name__}: no parameter {', '.join(moved)} to place options after")
    names = [parameter.name for parameter in ordered]
    if len(set(names)) != len(names):
        raise TypeError(f"{command.__name__}: two options of one name in {names}")

    @functools.wraps(command)
    def cli_command(**values: object) -> _Returned:
        for name, (expansion, options) in expansions.items():
            values[name] = expansion.build({option: values.pop(option) for option in options})
        return command(**values)

    cli_command.__signature__ = signature.replace(parameters=ordered)  # type: ignore[attr-defined] - click reads __signature__, which functions accept at run time
    return cli_command


def _expansion(annotation: object) -> Expansion | None:
    if isinstance(annotation, type) and issubclass(annotation, OptionGroup):
        return annotation
    if typing.get_origin(annotation) is typing.Annotated:
        found = [
            m for m in typing.get_args(annotation)[1:] if hasattr(m, "parameters") and hasattr(m, "build")
        ]
        return found[0] if found else None
    return None
