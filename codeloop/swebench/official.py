"""SWE-bench's own code, loaded without its package `__init__`s.

`swebench/__init__.py` and `swebench/harness/__init__.py` import Docker's SDK, modal and the
dataset collectors; the parts codeloop uses need none of them: the specs
(`harness/constants`), the log parsers (`harness/log_parsers`), the grading (`harness/grading`)
and the test directives and requirement cleaning of `harness/test_spec/python.py`. So the three
package modules are registered as plain namespace-like packages pointing at swebench's
directories, and only those submodules are imported, unchanged. The version is checked: grading
must be the pinned harness's.
"""

import importlib
import importlib.metadata
import importlib.util
import sys
import types
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from pydantic import JsonValue

from codeloop.swebench.errors import SpecError

if TYPE_CHECKING:  # swebench's own modules are loaded by `swebench()`, not imported
    from swebench.harness.test_spec.test_spec import TestSpec

PINNED = "4.1.0"
_PACKAGES = ("swebench", "swebench.harness", "swebench.harness.test_spec")

Spec = dict[str, JsonValue]
"""SWE-bench's spec of one (repository, version): `python`, `packages`, `pip_packages`,
`pre_install`, `install`, `test_cmd`, `eval_commands`, ... as `MAP_REPO_VERSION_TO_SPECS` holds
it. A `--specs` file's specs join that table checked for their keys only, so a value is read
for the type it should have."""


LogParser = Callable[[str, "TestSpec"], dict[str, str]]
"""One of SWE-bench's log parsers: (the test log, its `TestSpec`) -> test name -> status."""


@cache
def swebench() -> types.SimpleNamespace:
    """The modules of swebench codeloop uses: `constants`, `log_parsers`, `grading`,
    `test_spec_python`, `test_spec` (its `TestSpec`), `utils`.

    Raises:
        SpecError: swebench is not installed, or not the pinned version.
    """
    try:
        version = importlib.metadata.version("swebench")
    except importlib.metadata.PackageNotFoundError:
        raise SpecError(f"the swebench package is not installed: pip install swebench=={PINNED}") from None
    if version != PINNED:
        raise SpecError(
            f"swebench {version} is installed; codeloop grades with {PINNED}: pip install swebench=={PINNED}"
        )
    _register_packages()
    names = {
        "constants": "swebench.harness.constants",
        "log_parsers": "swebench.harness.log_parsers",
        "grading": "swebench.harness.grading",
        "test_spec_python": "swebench.harness.test_spec.python",
        "test_spec": "swebench.harness.test_spec.test_spec",
        "utils": "swebench.harness.utils",
    }
    return types.SimpleNamespace(**{key: importlib.import_module(name) for key, name in names.items()})


def _register_packages() -> None:
    """Put the package modules in `sys.modules` with their `__path__`, without running their code
    (a package already imported for real is left as it is)."""
    spec = importlib.util.find_spec("swebench")
    assert spec is not None and spec.submodule_search_locations is not None
    root = list(spec.submodule_search_locations)[0]
    for name in _PACKAGES:
        if name in sys.modules:
            continue
        module = types.ModuleType(name)
        module.__path__ = [root + name.removeprefix("swebench").replace(".", "/")]
        module.__package__ = name
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def specs_table() -> dict[str, dict[str, Spec]]:
    """SWE-bench's `MAP_REPO_VERSION_TO_SPECS` (repository → version → spec), the live table."""
    return swebench().constants.MAP_REPO_VERSION_TO_SPECS


def parsers_table() -> dict[str, LogParser]:
    """SWE-bench's `MAP_REPO_TO_PARSER` (repository → log parser), the live table."""
    return swebench().log_parsers.MAP_REPO_TO_PARSER
