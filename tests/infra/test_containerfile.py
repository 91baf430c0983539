"""The container image's build file, checked offline: the image cannot be built on this machine, so
what its build copies, installs and runs is checked against the repository and the CLI instead."""

import shutil
from pathlib import Path

from infra.checks import containerfile
from infra.checks.containerfile import CONTAINERFILE, parse
from tests.infra.conftest import ROOT


def test_the_containerfile_builds_from_this_repository_and_starts_codeloop(tracked: list[str]) -> None:
    """Every COPY source exists and is in the build context, pip installs the project's pins
    (torch the Makefile's CPU 2.13.0), every `codeloop` line parses, and the image is not root."""
    instructions = parse((ROOT / CONTAINERFILE).read_text())
    keywords = [i.keyword for i in instructions]
    assert keywords[0] == "FROM" and "bookworm" in instructions[0].value
    sources = [s for i in instructions if i.keyword == "COPY" for s in containerfile.copy_sources(i)]
    assert {"pyproject.toml", "README.md", "codeloop", "bus", "agents", "tool_servers", "sandbox"} <= set(
        sources
    )
    assert containerfile.makefile_torch_pin(ROOT) == "2.13.0"
    assert any(
        "torch==2.13.0" in i.value and "whl/cpu" in i.value for i in instructions if i.keyword == "RUN"
    )
    entry = [i for i in instructions if i.keyword == "ENTRYPOINT"][-1].words()
    assert entry[-1] == "codeloop" and "tini" in entry[0]
    assert containerfile.check(ROOT, tracked) == []


def test_a_broken_containerfile_is_caught_naming_each_problem(tmp_path: Path, tracked: list[str]) -> None:
    """A missing COPY source, an ignored one, a foreign torch pin, a misspelt flag and a root user
    each fail the check: the check can fail, and says where."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "codeloop").mkdir()
    (tmp_path / "codeloop" / "cli.py").write_text("")
    (tmp_path / "README.md").write_text("")
    (tmp_path / ".containerignore").write_text("# docs are not needed\n*.md\n")
    (tmp_path / "Containerfile").write_text(
        "FROM python:3.11-slim-bookworm\n"
        "RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.12.0\n"
        "COPY pyproject.toml README.md ./\n"
        "COPY codeloop ./codeloop\n"
        "COPY tool_servers ./tool_servers\n"
        "RUN pip install . \\\n"
        " && codeloop --version\n"
        "USER root\n"
        'ENTRYPOINT ["/usr/bin/tini", "--", "codeloop"]\n'
        'CMD ["serve", "--health-prot", "8081"]\n'
    )
    problems = containerfile.check(tmp_path, ["README.md", "codeloop/cli.py"], Path("Containerfile"))
    text = "\n".join(problems)
    assert "COPY source tool_servers is not in the repository" in text
    assert "line 3: COPY README.md: .containerignore leaves out README.md" in text
    assert "torch==2.12.0 is outside" in text and "not the Makefile's 2.13.0" in text
    assert "ENTRYPOINT + CMD: codeloop serve: No such option: --health-prot" in text
    assert "the last USER is root" in text
    assert len(problems) == 6, problems
