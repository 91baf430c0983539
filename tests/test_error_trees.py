"""One base per package: a caller catches every error `agents` raises with `except AgentError`,
and every error of the CLI and composition root with `except CodeloopError`."""

import importlib
import inspect
import pkgutil

import pytest

from agents.errors import AgentError
from codeloop.errors import CodeloopError


def _exceptions_defined_in(package: str) -> list[type[BaseException]]:
    root = importlib.import_module(package)
    found = []
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if info.name.endswith(".__main__"):  # running it is the CLI, not a definition
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    return found


@pytest.mark.parametrize(("package", "base"), [("agents", AgentError), ("codeloop", CodeloopError)])
def test_every_error_a_package_defines_derives_from_its_base(package: str, base: type[Exception]) -> None:
    found = _exceptions_defined_in(package)
    assert found, f"no exceptions found in {package}: the walk is broken"
    strays = sorted(f"{e.__module__}.{e.__qualname__}" for e in found if not issubclass(e, base))
    assert strays == [], f"derive these from {base.__name__}: {strays}"


def test_re_parented_errors_are_still_caught_by_their_old_bases() -> None:
    """Re-parenting kept every `except` that already caught them working."""
    from agents.roles.verifier.patchset import MalformedPatch
    from codeloop.wiring.roles import UnknownRole

    assert issubclass(MalformedPatch, ValueError) and issubclass(UnknownRole, ValueError)
