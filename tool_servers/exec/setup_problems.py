"""Why a test suite could not run, said honestly: an environment that could not be built, or a
suite that cannot import (a missing module, a collection error) is named as such — the module and
the file — never reported as "no tests were collected", which stays for a suite with no tests.

Classes (the failure vocabulary of docs/failure-classes.md):
- `env.setup`: the environment is not fit to run the suite — its build failed, pytest is not
  installed, or a module the tests import is neither installed nor part of the project;
- `test.collection_error`: the project's own code fails at import (a syntax error, an
  ImportError of a name its modules do not define, an exception raised at import).
"""

import re
from pathlib import Path

from sandbox.errors import BuildFailed, EnvironmentSetupError
from tool_servers.exec.pytest_report import SetupClass, SetupProblem, TestFailure

_MISSING_MODULE = re.compile(r"No module named '?([\w.]+)'?")
_MISSING_NAME = re.compile(r"cannot import name '?(\w+)'? from '?([\w.]+)'?")
_CONFTEST = re.compile(r"ImportError while loading conftest '([^']+)'")
_TEST_MODULE = re.compile(r"ImportError while importing test module '([^']+)'")
_ERROR_LINE = re.compile(r"^E\s+(\w+(?:Error|Exception)\b.*)$", re.M)
_NO_PYTEST = re.compile(r"No module named pytest\b")


def from_environment_error(error: EnvironmentSetupError) -> SetupProblem:
    """The problem of an environment that could not be made ready."""
    if isinstance(error, BuildFailed):
        return SetupProblem(
            failure_class="env.setup", message=str(error), step=error.step, missing=error.missing
        )
    return SetupProblem(failure_class="env.setup", message=str(error))


def _is_project_module(root: Path, module: str) -> bool:
    """Whether the top-level package of `module` is part of the project (at the root or in src/)."""
    top = module.split(".")[0]
    return any((base / top).is_dir() or (base / f"{top}.py").is_file() for base in (root, root / "src"))


def classify_import_failure(root: Path, text: str) -> tuple[SetupClass, str | None]:
    """The class of a failed import given its traceback text, and the module missing if any."""
    match = _MISSING_MODULE.search(text) or _MISSING_NAME.search(text)
    module = match.group(match.lastindex or 1) if match else None
    # A module that is not the project's, or a name an installed package does not define (a
    # version the project's code was not written for): the environment's fault, not the code's.
    if module is not None and not _is_project_module(root, module):
        return "env.setup", module
    return "test.collection_error", module


def _what_failed(root: Path, text: str, failure_class: str | None, module: str | None) -> str:
    """`cannot import ...` and, for the environment's failures, what to do about it. A name an
    installed package does not define is a release the project's code was not written for (a
    project copied without its history, its loose requirements resolved to today's releases):
    said so, with how to pin or bound the environment, instead of "the environment lacks it"."""
    name = _MISSING_NAME.search(text)
    if failure_class == "env.setup" and name is not None and not _is_project_module(root, name.group(2)):
        package = name.group(2).split(".")[0]
        return (
            f"cannot import {name.group(1)!r} from {name.group(2)!r}: the installed {package} does not "
            f"define it, so the project's code was written for another release of {package}; pin or "
            f"bound it in [environment] install (e.g. \"pip install '{package}<N'\") or read the "
            "package index as of the project's date ([environment] index_date)"
        )
    what = f"cannot import {module!r}" if module else "fails at import"
    return what + (": the environment lacks it" if failure_class == "env.setup" else "")


def classify_failures(root: Path, failures: list[TestFailure]) -> list[TestFailure]:
    """`failures` with each collection error (a test file that could not be imported) classed."""
    classed = []
    for failure in failures:
        if failure.outcome == "error" and "::" not in failure.test_id:
            failure_class, _ = classify_import_failure(root, f"{failure.message}\n{failure.traceback}")
            failure = failure.model_copy(update={"failure_class": failure_class})
        classed.append(failure)
    return classed


def from_collection_errors(root: Path, failures: list[TestFailure]) -> SetupProblem | None:
    """The problem of a suite whose collected files all failed to import (none ran)."""
    errors = [f for f in failures if f.failure_class is not None]
    if not errors:
        return None
    first = errors[0]
    text = f"{first.message}\n{first.traceback}"
    module = _MISSING_MODULE.search(text)
    others = f" (and {len(errors) - 1} more files)" if len(errors) > 1 else ""
    what = _what_failed(root, text, first.failure_class, module.group(1) if module else None)
    return SetupProblem(
        failure_class=first.failure_class or "test.collection_error",
        message=f"no test ran: {first.file or first.test_id} {what}{others}: {first.message}",
        module=module.group(1) if module else None,
        file=first.file or first.test_id,
    )


def from_output(root: Path, output: str, prefixes: tuple[str, ...], python: str) -> SetupProblem | None:
    """The problem of a pytest run that wrote no report: pytest missing, or a conftest.py or a
    test module that failed at import before collection."""
    if _NO_PYTEST.search(output):
        return SetupProblem(
            failure_class="env.setup",
            message=f"pytest is not installed for {python}: add it to the project's test requirements "
            "or to [environment] install",
            module="pytest",
        )
    match = _CONFTEST.search(output) or _TEST_MODULE.search(output)
    if match is None:
        return None
    file = match.group(1)
    for prefix in prefixes:
        file = file.removeprefix(prefix)
    failure_class, module = classify_import_failure(root, output)
    error = _ERROR_LINE.search(output)
    detail = error.group(1).strip() if error else "an import error"
    what = _what_failed(root, output, failure_class, module)
    return SetupProblem(
        failure_class=failure_class,
        message=f"no test ran: {file} {what} ({detail})",
        module=module,
        file=file,
    )
