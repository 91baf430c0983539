"""The test modules of a repository are what its pytest configuration collects."""

from pathlib import Path

import pytest

from agents.roles.verifier.test_modules import DEFAULT_PATTERNS, is_test_module, python_files


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("tox.ini", "[tox]\nenvlist = py39\n\n[pytest]\npython_files = test_*.py *_test.py testing/*/*.py\n"),
        (
            "setup.cfg",
            "[metadata]\nname = x\n\n[tool:pytest]\npython_files =\n    test_*.py\n    testing/*/*.py\n",
        ),
        ("pyproject.toml", '[tool.pytest.ini_options]\npython_files = ["test_*.py", "testing/*/*.py"]\n'),
    ],
)
def test_python_files_is_read_from_the_file_pytest_takes_its_configuration_from(
    tmp_path: Path, name: str, text: str
) -> None:
    (tmp_path / name).write_text(text)
    patterns = python_files(tmp_path)
    assert is_test_module("testing/python/fixtures.py", patterns)  # pytest's own tests
    assert is_test_module("testing/test_collection.py", patterns)
    assert not is_test_module("src/_pytest/python.py", patterns)
    assert not is_test_module("testing/conftest.txt", patterns)


def test_the_first_file_with_a_pytest_section_decides_as_pytest_does(tmp_path: Path) -> None:
    """A pytest.ini without `python_files` is still pytest's configuration: the defaults hold,
    whatever tox.ini says; a tox.ini without a [pytest] section is passed over."""
    (tmp_path / "tox.ini").write_text("[pytest]\npython_files = check_*.py\n")
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\npython_files = spec_*.py\n")
    assert python_files(tmp_path) == ("check_*.py",)
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = py39\n")
    assert python_files(tmp_path) == ("spec_*.py",)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -q\n")
    assert python_files(tmp_path) == DEFAULT_PATTERNS


def test_without_configuration_or_with_a_broken_one_the_defaults_hold(tmp_path: Path) -> None:
    assert python_files(tmp_path) == DEFAULT_PATTERNS
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options\n")
    assert python_files(tmp_path) == DEFAULT_PATTERNS
    assert is_test_module("tests/test_ops.py") and is_test_module("ops_test.py")
    assert not is_test_module("tests/conftest.py") and not is_test_module("tests/helpers.py")
