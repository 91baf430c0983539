"""The Containerfile read as its instructions, and what would break its build or its entry point.

The image cannot be built here (no container engine, no network), so what can go wrong offline is
checked instead: every COPY source is in the repository and not dropped by an ignore file, the
pip requirements it installs are the project's (and torch the Makefile's CPU pin), every
`codeloop` command line it runs or starts with parses, and it ends as a non-root user.
"""

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from infra.checks.cli_drift import command_problems, shell_invocations

CONTAINERFILE = Path("infra/container/Containerfile")
IGNORE_FILES = (".containerignore", ".dockerignore")


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    value: str

    def words(self) -> list[str]:
        """The exec form's JSON list, or the shell form split as words."""
        text = self.value.strip()
        if text.startswith("["):
            return json.loads(text)
        return shlex.split(text)


def parse(text: str) -> list[Instruction]:
    """Instructions with backslash continuations joined and comment lines dropped."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(part.strip() for part in pending)
        pending = []
        keyword, _, value = joined.partition(" ")
        instructions.append(Instruction(start, keyword.upper(), value.strip()))
    return instructions


def copy_sources(instruction: Instruction) -> list[str]:
    """A COPY's sources (its flags and destination left out); none for `COPY --from=` a stage."""
    words = instruction.words()
    if any(word.startswith("--from") for word in words):
        return []
    args = [word for word in words if not word.startswith("--")]
    return args[:-1]


def ignore_patterns(root: Path) -> tuple[Path | None, list[str]]:
    for name in IGNORE_FILES:
        path = root / name
        if path.is_file():
            lines = [line.strip() for line in path.read_text().splitlines()]
            return path, [line for line in lines if line and not line.startswith("#")]
    return None, []


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus `**`) as a regex on a relative path."""
    out = []
    i = 0
    pattern = pattern.strip("/")
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + "$")


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether the build context leaves `path` out: a pattern matches it or a parent; the last
    matching pattern wins, and `!` patterns take paths back in."""
    parts = Path(path).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern[1:] if negate else pattern)
        if any(regex.match(candidate) for candidate in candidates):
            result = not negate
    return result


def requirement_problems(instructions: list[Instruction], project: dict, torch_pin: str) -> list[str]:
    """pip installs that are not the project's: unknown names, versions outside its specifiers."""
    wanted = {}
    for spec in project["project"]["dependencies"]:
        requirement = Requirement(spec)
        wanted[canonicalize_name(requirement.name)] = requirement
    problems = []
    installs_project = False
    for instruction in instructions:
        if instruction.keyword != "RUN":
            continue
        for words in shell_invocations(instruction.value, program="pip"):
            if words[:1] != ["install"]:
                continue
            skip_next = False
            for word in words[1:]:
                if skip_next:
                    skip_next = False
                    continue
                if word in ("--index-url", "-i", "--extra-index-url", "-c", "-r"):
                    skip_next = True
                    continue
                if word.startswith("-"):
                    continue
                if word == ".":
                    installs_project = True
                    continue
                try:
                    requirement = Requirement(word)
                except InvalidRequirement:
                    problems.append(f"line {instruction.line}: pip install {word!r} is not a requirement")
                    continue
                name = canonicalize_name(requirement.name)
                if name not in wanted:
                    problems.append(
                        f"line {instruction.line}: pip installs {requirement.name}, not a project dependency"
                    )
                    continue
                pins = [s.version for s in requirement.specifier if s.operator == "=="]
                for pin in pins:
                    if not wanted[name].specifier.contains(pin, prereleases=True):
                        problems.append(
                            f"line {instruction.line}: {requirement.name}=={pin} is outside the project's {wanted[name]}"
                        )
                if name == "torch" and pins != [torch_pin]:
                    problems.append(
                        f"line {instruction.line}: torch is pinned to {pins} not the Makefile's {torch_pin}"
                    )
    if not installs_project:
        problems.append("no `pip install .`: codeloop itself is not installed")
    return problems


def cli_problems(instructions: list[Instruction]) -> list[str]:
    """Every `codeloop` command line a RUN runs, and ENTRYPOINT + CMD, must parse."""
    problems = []
    for instruction in instructions:
        if instruction.keyword == "RUN":
            for argv in shell_invocations(instruction.value):
                problems += [f"line {instruction.line}: {p}" for p in command_problems(argv)]
    entry = [i for i in instructions if i.keyword == "ENTRYPOINT"]
    cmd = [i for i in instructions if i.keyword == "CMD"]
    if not entry:
        return [*problems, "no ENTRYPOINT"]
    words = entry[-1].words() + (cmd[-1].words() if cmd else [])
    programs = [n for n, word in enumerate(words) if word.rsplit("/", 1)[-1] == "codeloop"]
    if not programs:
        return [*problems, f"line {entry[-1].line}: the entry point does not run codeloop"]
    problems += [f"ENTRYPOINT + CMD: {p}" for p in command_problems(words[programs[0] + 1 :])]
    return problems


def user_problems(instructions: list[Instruction]) -> list[str]:
    users = [i for i in instructions if i.keyword == "USER"]
    if not users:
        return ["no USER: the image would run as root"]
    user = users[-1].value.split(":", 1)[0].strip()
    if user in ("0", "root", ""):
        return [f"line {users[-1].line}: the last USER is root"]
    return []


def makefile_torch_pin(root: Path) -> str:
    found = re.search(r"torch==([\w.+-]+)", (root / "Makefile").read_text())
    if found is None:
        raise ValueError("the Makefile pins no torch version")
    return found.group(1)


def copy_problems(instructions: list[Instruction], root: Path, tracked: list[str]) -> list[str]:
    """COPY sources missing from the repository, or left out of the build context."""
    ignore_file, patterns = ignore_patterns(root)
    problems = []
    for instruction in instructions:
        if instruction.keyword not in ("COPY", "ADD"):
            continue
        for source in copy_sources(instruction):
            source = source.rstrip("/")
            if not (root / source).exists():
                problems.append(f"line {instruction.line}: COPY source {source} is not in the repository")
                continue
            inside = [path for path in tracked if path == source or path.startswith(source + "/")]
            dropped = [path for path in inside or [source] if ignored(path, patterns)]
            if dropped and ignore_file is not None:
                problems.append(
                    f"line {instruction.line}: COPY {source}: {ignore_file.name} leaves out {', '.join(dropped[:3])}"
                )
    return problems


def check(root: Path, tracked: list[str], path: Path = CONTAINERFILE) -> list[str]:
    """Every problem of the Containerfile at `root / path`; `tracked`: the repository's files."""
    import tomllib

    instructions = parse((root / path).read_text())
    project = tomllib.loads((root / "pyproject.toml").read_text())
    return [
        *copy_problems(instructions, root, tracked),
        *requirement_problems(instructions, project, makefile_torch_pin(root)),
        *cli_problems(instructions),
        *user_problems(instructions),
    ]
