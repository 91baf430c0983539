"""Scripted model decisions: `function:examples/models/scripted.py:NAME` stands in for an LLM.

Each public function has pydantic-ai FunctionModel's signature `(messages, info) -> ModelResponse`
and serves both LLM roles: as the planner (an output tool and no function tools) it answers with
a `Plan`; as the coder (MCP tools offered) it works through the tools and ends with a text.

The coder decisions are strategies written as generators that yield tool calls and receive
what the tools returned. A decision replays the run's history (every tool call and its real
result, read from the `ToolReturnPart`s in `messages`) into a fresh generator, and the first
call the generator asks for beyond the history is the next response. So a decision depends only
on the prompt and the observations, never on hidden state, and a replayed run decides the same.

- `fix`: write/execute mode. Runs the tests when `run_tests` is offered (else takes the failing
  tests from the verifier's feedback or the task text), reads the failing tests and the
  repository modules they import, finds the functions those tests call, and tries small
  mutations of them (a comparison made inclusive or exclusive, `and`/`or`, a dropped `± 1`,
  `min`/`max`, a rounding mode) one by one with `write_file`, keeping the first that makes the
  failing tests pass without breaking the others. Without `run_tests` it applies the best ranked
  mutation unverified. In read mode it answers like `explain`. It can fix single-token bugs, the
  kind the shipped examples have; it does not understand code.
- `fix_priced`: `fix`, with its usage priced as gpt-4o's (the callable's `priced_as`): cost
  budgets and the cost figures of `eval` without an LLM.
- `explain`: read mode. Reads the files the context names (or whose path matches the task's
  words) and answers quoting, as `path:line: code`, the functions the task names in backquotes
  and the lines that share most words with the task.
- `loop`: calls `list_files` with the same arguments forever (step budget, repeated-call guard).
- `slow`: sleeps `CODELOOP_SCRIPTED_DELAY_S` seconds (default 2) before each decision, then
  decides like `fix` (wall-clock deadline).
- `wrong_fix`: the first attempt lands a change that fixes nothing (a comment above the suspect
  function); when the prompt starts with the verifier's failures it removes that comment and
  fixes like `fix`, starting from the tests the feedback names (revision loop). Its first
  attempt takes the failing tests from the task text when it names them, without running them.

Conventions in the task text that the strategies read (machine-readable, for tasks that test
the pipeline's mechanics, not a model's intelligence):

- ``replace `OLD` with `NEW` in `PATH` `` — `fix` makes exactly that edit, then runs the tests.
- ``add a test `tests/FILE.py::NAME` `` plus ``` `EXPR` should return `VALUE` ``` (or
  ``` `EXPR` should raise `ERROR` ```) — `fix` writes that test into FILE, importing the function
  EXPR calls from the module that defines it, and runs it.
- Test node ids (`tests/x.py::test_y`) anywhere in the text are taken as the failing tests when
  no test run is possible.
"""

import ast
import builtins
import io
import json
import os
import re
import tokenize
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

BUILTINS = frozenset(dir(builtins))
MARKER = "# codeloop-scripted: suspected here"
"""The comment `wrong_fix` plants on its first attempt and removes when revising."""
MAX_READS = 8
"""Repository modules a fix reads beyond the failing tests' files."""
MAX_CANDIDATES = 12
MAX_QUOTED = 25
"""Lines of a function the task names that an explanation quotes."""
NODE_ID = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*test_\w*\.py::[\w\[\]-]+)")
PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:py|md|toml|cfg|txt|json))\b")
FEEDBACK = re.compile(r"^- \[(?P<cls>[\w.]+)\] (?P<test>\S+)(?: (?P<loc>\S+:\d+))?", re.M)
STOPWORDS = frozenset(
    "the and for with that this from what when where which does should into have been will would "
    "there their them they then than also only some more most other such each please explain "
    "where's how why who code file files function functions test tests repository project".split()
)


# ---------------------------------------------------------------- history and driving


@dataclass
class Result:
    ok: bool
    content: Any
    """The tool's structured result (a dict) when ok, else the error text."""


@dataclass
class Call:
    tool: str
    args: dict[str, Any]


@dataclass
class Ctx:
    prompt: str
    tools: frozenset[str]

    def section(self, title: str) -> str:
        """The body of `## title` in the prompt ('' when absent)."""
        found = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", self.prompt, re.S | re.M)
        return found.group(1).strip() if found else ""

    @property
    def task(self) -> str:
        return self.section("Task") or self.prompt

    @property
    def revising(self) -> bool:
        return "## Your previous attempt failed verification" in self.prompt

    def listed(self, title: str) -> list[str]:
        return [
            line[2:].strip().strip("`") for line in self.section(title).splitlines() if line.startswith("- ")
        ]


Strategy = Generator[Call, Result, str]


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def _results(messages: list[ModelMessage]) -> list[Result]:
    """What each tool call of the run returned, in call order."""
    returned: dict[str, Result] = {}
    order: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                order.append(part.tool_call_id)
            elif isinstance(part, ToolReturnPart):
                ok = getattr(part, "outcome", "success") in (None, "success")
                returned[part.tool_call_id] = Result(ok, _structured(part.content))
            elif isinstance(part, RetryPromptPart) and part.tool_call_id:
                returned[part.tool_call_id] = Result(False, str(part.content))
    return [returned.get(i, Result(False, "no result")) for i in order]


def _structured(content: object) -> object:
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _drive(make: Callable[[Ctx], Strategy], messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    ctx = Ctx(_prompt(messages), frozenset(t.name for t in info.function_tools))
    strategy = make(ctx)
    try:
        call = next(strategy)
        for result in _results(messages):
            call = strategy.send(result)
    except StopIteration as stop:
        return ModelResponse(parts=[TextPart(str(stop.value))])
    return ModelResponse(parts=[ToolCallPart(call.tool, call.args)])


def _is_planner(info: AgentInfo) -> bool:
    return bool(info.output_tools) and not info.function_tools


# ---------------------------------------------------------------- planner


def _plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    ctx = Ctx(_prompt(messages), frozenset())
    task = ctx.section("Task") or ctx.prompt
    found = ctx.listed("Files a search for the task found")
    named = [p for p in PATH.findall(task) if "::" not in p]
    nodes = NODE_ID.findall(task)
    files = list(dict.fromkeys(named + found))
    sources = [f for f in files if not _is_test(f)]
    tests = list(dict.fromkeys(nodes + [f for f in files if _is_test(f)]))
    requested = ADD_TEST.search(task)
    if requested:  # the test to add is the target: tests that fail for other reasons are not this task's
        tests = [requested["node"]]
    read_mode = "(read mode)" in ctx.prompt.split("\n", 1)[0]
    steps = [{"description": "Read the code the task is about", "files": sources[:5]}]
    if read_mode:
        steps.append({"description": "Answer citing the files and lines the answer rests on", "files": []})
    else:
        steps += [
            {"description": "Run the tests and find the ones that fail", "files": tests[:5]},
            {
                "description": "Change the code the failing tests exercise until they pass",
                "files": sources[:3],
            },
            {"description": "Run the whole test suite again", "files": []},
        ]
    plan = {
        "steps": steps,
        "hypotheses": [f"the behaviour the task describes comes from {f}" for f in sources[:3]],
        "files_of_interest": sources[:8],
        "test_targets": tests[:8],
        "done_criteria": ["the answer cites real files and lines"] if read_mode else ["every test passes"],
        "revision_reason": "the previous attempt failed verification"
        if ctx.section("Why it failed")
        else None,
    }
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, plan)])


# ---------------------------------------------------------------- repository helpers


def _is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or "tests/" in f"/{path}"
    )


def _list_paths(result: Result) -> list[str]:
    if not result.ok or not isinstance(result.content, dict):
        return []
    return [entry["path"] for entry in result.content.get("files", [])]


def _text(result: Result) -> str | None:
    if result.ok and isinstance(result.content, dict) and result.content.get("decodable", True):
        return result.content.get("content")
    return None


def _module_files(module: str, files: set[str]) -> list[str]:
    base = module.replace(".", "/")
    return [
        p
        for p in (f"{base}.py", f"{base}/__init__.py", f"src/{base}.py", f"src/{base}/__init__.py")
        if p in files
    ]


def _imports(source: str, files: set[str]) -> list[str]:
    """Repository files `source` imports (absolute imports only)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _module_files(alias.name, files)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += _module_files(node.module, files)
            for alias in node.names:
                found += _module_files(f"{node.module}.{alias.name}", files)
    return list(dict.fromkeys(found))


def _module_name(path: str) -> str:
    stem = path[4:] if path.startswith("src/") else path
    stem = stem[: -len("/__init__.py")] if stem.endswith("/__init__.py") else stem[:-3]
    return stem.replace("/", ".")


def _functions(source: str) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, []).append(node)
    return found


def _called_names(node: ast.AST) -> list[str]:
    """Names a piece of code calls or reads as attributes (properties are calls too), in order."""
    names: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            names.append(sub.func.id)
        elif isinstance(sub, ast.Attribute):
            names.append(sub.attr)
    return list(dict.fromkeys(names))


def _test_function(source: str, name: str) -> ast.AST | None:
    bare = name.split("[", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == bare:
            return node
    return None


# ---------------------------------------------------------------- mutations

SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "and": "or", "or": "and", "min": "max", "max": "min"}
ROUNDING = {
    "ROUND_HALF_EVEN": "ROUND_HALF_UP",
    "ROUND_HALF_UP": "ROUND_HALF_EVEN",
    "ROUND_DOWN": "ROUND_HALF_UP",
    "ROUND_UP": "ROUND_HALF_UP",
    "ROUND_FLOOR": "ROUND_HALF_UP",
    "ROUND_CEILING": "ROUND_HALF_UP",
}
PRIORITY = {"compare": 0, "logic": 1, "offset": 2, "rounding": 3, "minmax": 4}


@dataclass(frozen=True)
class Mutation:
    path: str
    line: int
    before: str
    after: str
    kind: str
    content: str
    """The whole file with the mutation applied."""

    def describe(self) -> str:
        return f"{self.path}:{self.line}: `{self.before}` -> `{self.after}`"


def _mutations(path: str, source: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Mutation]:
    lines = source.splitlines(keepends=True)
    body_start = node.body[0].lineno
    if isinstance(node.body[0], ast.Expr) and isinstance(getattr(node.body[0], "value", None), ast.Constant):
        body_start = (
            node.body[0].end_lineno + 1 if len(node.body) > 1 else node.end_lineno + 1  # pyright: ignore[reportOptionalOperand] - parsed from source: every node has its line numbers
        )  # skip docstring
    end = node.end_lineno or node.lineno
    found: list[Mutation] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    for i, tok in enumerate(tokens):
        row, col = tok.start
        if not body_start <= row <= end:
            continue
        text, kind = tok.string, None
        replacement: tuple[int, int, str] | None = None  # (start col, end col, new text) on `row`
        if tok.type == tokenize.OP and text in ("<", "<=", ">", ">="):
            kind, replacement = "compare", (col, tok.end[1], SWAPS[text])
        elif tok.type == tokenize.NAME and text in ("and", "or"):
            kind, replacement = "logic", (col, tok.end[1], SWAPS[text])
        elif (
            tok.type == tokenize.NAME
            and text in ("min", "max")
            and i + 1 < len(tokens)
            and tokens[i + 1].string == "("
        ):
            kind, replacement = "minmax", (col, tok.end[1], SWAPS[text])
        elif tok.type == tokenize.NAME and text in ROUNDING:
            kind, replacement = "rounding", (col, tok.end[1], ROUNDING[text])
        elif tok.type == tokenize.OP and text in ("+", "-") and i + 1 < len(tokens):
            nxt = tokens[i + 1]
            if nxt.type == tokenize.NUMBER and nxt.string == "1" and nxt.start[0] == row:
                start = col
                while start > 0 and lines[row - 1][start - 1] == " ":
                    start -= 1
                kind, replacement = "offset", (start, nxt.end[1], "")
        if replacement is None or kind is None:
            continue
        start, stop, new = replacement
        old_line = lines[row - 1]
        new_line = old_line[:start] + new + old_line[stop:]
        content = "".join(lines[: row - 1] + [new_line] + lines[row:])
        found.append(Mutation(path, row, old_line.strip(), new_line.strip(), kind, content))
    return sorted(found, key=lambda m: (PRIORITY[m.kind], m.line))


# ---------------------------------------------------------------- strategies


def _failing_from_run(result: Result) -> list[str] | None:
    """Node ids of the failing tests, [] when all passed, None when the run itself failed."""
    if not result.ok or not isinstance(result.content, dict):
        return None
    out = result.content
    if out.get("timed_out") or not out.get("report_found", True):
        return None
    return [f["test_id"] for f in out.get("failures", [])]


def _run_passed(result: Result, *, allowed: set[str] | frozenset[str] = frozenset()) -> bool:
    """The run found tests and none failed but the `allowed` ones (failing before, unrelated)."""
    failing = _failing_from_run(result)
    ran = isinstance(result.content, dict) and result.content.get("passed", 0) > 0
    return failing is not None and ran and set(failing) <= allowed


def _find_failing(ctx: Ctx, *, run_first: bool = True) -> Generator[Call, Result, tuple[list[str], set[str]]]:
    """The failing tests to make pass, and every test failing before any change (so a fix is
    judged by the failures it adds, not by unrelated ones already there). The verifier's
    feedback names them when revising; else a test run finds them when `run_tests` is offered
    (`run_first`), narrowed to the ones the task names if it names any; else the task names them."""
    from_feedback = [
        m.group("test") for m in FEEDBACK.finditer(ctx.section("Your previous attempt failed verification"))
    ]
    from_feedback = list(dict.fromkeys(t for t in from_feedback if "::" in t))
    if from_feedback:
        return from_feedback, set(from_feedback)
    named = list(
        dict.fromkeys(
            NODE_ID.findall(ctx.task) + [t for t in ctx.listed("Tests that should pass") if "::" in t]
        )
    )
    if "run_tests" in ctx.tools and (run_first or not named):
        failing = _failing_from_run((yield Call("run_tests", {})))
        if failing:
            wanted = [t for t in failing if t in named]
            return wanted or failing, set(failing)
    return named, set(named)


def _read_all(paths: list[str], texts: dict[str, str]) -> Generator[Call, Result, None]:
    for path in paths:
        if path not in texts:
            text = _text((yield Call("read_file", {"path": path})))
            if text is not None:
                texts[path] = text


def _suspects(
    failing: list[str], texts: dict[str, str], files: set[str], context: list[str]
) -> Generator[Call, Result, list[Mutation]]:
    """Read the failing tests, what they import and the context's files; rank mutations of the
    functions the failing tests call (directly first, then what those call)."""
    test_files = list(dict.fromkeys(t.split("::", 1)[0] for t in failing if t.split("::", 1)[0] in files))
    yield from _read_all(test_files, texts)
    queue = [p for t in test_files if t in texts for p in _imports(texts[t], files)]
    queue += [p for p in context if p in files]
    modules: list[str] = []
    while queue and len(modules) < MAX_READS:
        path = queue.pop(0)
        if path in modules or _is_test(path):
            continue
        yield from _read_all([path], texts)
        if path in texts:
            modules.append(path)
            queue += _imports(texts[path], files)
    defs = {p: _functions(_clean(texts[p])) for p in modules}
    frontier: list[str] = []
    for test_id in failing:
        path, _, name = test_id.partition("::")
        node = _test_function(texts[path], name.split("::")[-1]) if path in texts else None
        if node is not None:
            frontier += _called_names(node)
    seen: set[str] = set()
    ranked: list[Mutation] = []
    for _depth in range(3):
        next_frontier: list[str] = []
        for name in dict.fromkeys(frontier):
            if name in seen:
                continue
            seen.add(name)
            for path in modules:
                for node in defs[path].get(name, []):
                    ranked += _mutations(path, _clean(texts[path]), node)
                    next_frontier += _called_names(node)
        frontier = next_frontier
    return list(dict.fromkeys(ranked))[:MAX_CANDIDATES]


def _clean(text: str) -> str:
    """A file without the comment `wrong_fix` planted."""
    return "".join(line for line in text.splitlines(keepends=True) if MARKER not in line)


def _bugfix(ctx: Ctx) -> Strategy:
    listing = yield Call("list_files", {"pattern": "**/*.py"})
    files = set(_list_paths(listing))
    failing, before = yield from _find_failing(ctx)
    if not failing:
        return "No failing test was found and the task names none, so nothing was changed."
    texts: dict[str, str] = {}
    candidates = yield from _suspects(failing, texts, files, ctx.listed("Relevant files"))
    if not candidates:
        return f"The failing tests ({', '.join(failing)}) call no code this script knows how to change."
    planted = [p for p, t in texts.items() if MARKER in t]
    for path in planted:
        if not any(c.path == path for c in candidates):
            yield Call("write_file", {"path": path, "content": _clean(texts[path])})
    if "run_tests" not in ctx.tools:
        best = candidates[0]
        yield Call("write_file", {"path": best.path, "content": best.content})
        return f"Changed {best.describe()} (not verified: no test runner was offered). Failing tests: {', '.join(failing)}."
    written: str | None = None
    tried: list[str] = []
    for candidate in candidates:
        if written and written != candidate.path:
            yield Call("write_file", {"path": written, "content": _clean(texts[written])})
        written = candidate.path
        yield Call("write_file", {"path": candidate.path, "content": candidate.content})
        # The whole suite each time: on a small project pytest's start-up costs more than the
        # tests, and one run tells both whether the targets pass and whether anything broke.
        everything = yield Call("run_tests", {})
        tried.append(candidate.describe())
        if _run_passed(everything, allowed=before - set(failing)):
            return (
                f"Fixed: {candidate.describe()}. The failing tests {', '.join(failing)} pass now and no other "
                f"test started failing ({_summary(everything)}). Tried {len(tried)} change(s)."
            )
    if written:
        yield Call("write_file", {"path": written, "content": _clean(texts[written])})
    return f"No change made {', '.join(failing)} pass; tried: " + "; ".join(tried)


REPLACE = re.compile(r"replace `(?P<old>[^`]+)` with `(?P<new>[^`]*)` in `?(?P<path>[\w./-]+)`?", re.I)
ADD_TEST = re.compile(r"add (?:a )?test `(?P<node>[\w./-]+\.py::\w+)`", re.I)
EXPECT = re.compile(r"`(?P<expr>[^`]+)` should (?:return|be|equal) `(?P<value>[^`]+)`", re.I)
EXPECT_RAISE = re.compile(r"`(?P<expr>[^`]+)` should raise `(?P<error>\w+)`", re.I)


def _replace(ctx: Ctx, found: re.Match[str]) -> Strategy:
    path, old, new = found["path"], found["old"], found["new"]
    text = _text((yield Call("read_file", {"path": path})))
    if text is None or old not in text:
        return f"`{old}` does not occur in {path}; nothing was changed."
    yield Call("write_file", {"path": path, "content": text.replace(old, new, 1)})
    if "run_tests" in ctx.tools:
        run = yield Call("run_tests", {})
        return f"Replaced `{old}` with `{new}` in {path}; tests: {_summary(run)}."
    return f"Replaced `{old}` with `{new}` in {path}."


def _summary(run: Result) -> str:
    if not isinstance(run.content, dict):
        return f"the test run failed ({str(run.content)[:200]})"
    out = run.content
    failing = ", ".join(f["test_id"] for f in out.get("failures", [])[:5])
    return f"{out.get('passed', 0)} passed, {out.get('failed', 0)} failed" + (
        f" ({failing})" if failing else ""
    )


def _add_test(ctx: Ctx, node: str) -> Strategy:
    task = ctx.task
    test_path, _, test_name = node.partition("::")
    expect, raises = EXPECT.search(task), EXPECT_RAISE.search(task)
    found = expect or raises
    if found is None:
        return "The task does not say what the test should check (`EXPR` should return `VALUE`)."
    expr = found["expr"]
    check = expr + (f" {expect['value']}" if expect else "")
    wanted = [n for n in dict.fromkeys(re.findall(r"\b([A-Za-z_]\w*)\s*\(", check)) if n not in BUILTINS]
    if raises and raises["error"] not in BUILTINS:
        wanted.append(raises["error"])
    listing = _list_paths((yield Call("list_files", {"pattern": "**/*.py"})))
    existing = _text((yield Call("read_file", {"path": test_path}))) if test_path in listing else None
    homes: dict[str, str] = {}
    texts: dict[str, str] = {}
    sources = sorted(
        (p for p in listing if not _is_test(p)), key=lambda p: (not any(w in p for w in wanted), p)
    )
    for path in sources:
        if all(name in homes for name in wanted):
            break
        yield from _read_all([path], texts)
        defined = _top_level(texts.get(path, ""))
        for name in wanted:
            if name in defined and name not in homes:
                homes[name] = path
    missing = [name for name in wanted if name not in homes]
    if missing:
        return f"No module of the repository defines {', '.join(missing)}; no test was written."
    by_module: dict[str, list[str]] = {}
    for name in wanted:
        by_module.setdefault(_module_name(homes[name]), []).append(name)
    imports = (["import pytest\n"] if raises else []) + [
        f"from {module} import {', '.join(sorted(names))}\n" for module, names in sorted(by_module.items())
    ]
    if raises:
        body = f"    with pytest.raises({raises['error']}):\n        {expr}\n"
    else:
        body = f"    assert {expr} == {expect['value']}\n"  # type: ignore[index] - expect is the dict the scripted plan wrote, with a value key
    content = existing or ""
    imports = [line for line in imports if line not in content]
    content = (
        _insert_imports(content, imports)
        + ("\n\n\n" if content.strip() else "")
        + f"def {test_name}():\n{body}"
    )
    yield Call("write_file", {"path": test_path, "content": content.lstrip("\n")})
    if "run_tests" in ctx.tools:
        run = yield Call("run_tests", {"paths": [node]})
        return f"Added {node}, checking `{expr}`; it {'passes' if _run_passed(run) else 'fails'}: {_summary(run)}."
    return f"Added {node}, checking `{expr}`."


def _top_level(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _insert_imports(content: str, imports: list[str]) -> str:
    if not imports:
        return content.rstrip("\n")
    lines = content.splitlines(keepends=True)
    last = max((i for i, line in enumerate(lines) if line.startswith(("import ", "from "))), default=-1)
    return "".join(lines[: last + 1] + imports + lines[last + 1 :]).rstrip("\n")


def _fix(ctx: Ctx) -> Strategy:
    if "write_file" not in ctx.tools:
        return (yield from _explain(ctx))
    replace = REPLACE.search(ctx.task)
    if replace:
        return (yield from _replace(ctx, replace))
    add = ADD_TEST.search(ctx.task)
    if add:
        return (yield from _add_test(ctx, add["node"]))
    return (yield from _bugfix(ctx))


def _terms(text: str) -> list[str]:
    quoted = re.findall(r"`([^`]+)`", text)
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]{3,}", re.sub(r"`[^`]*`", " ", text))
    parts = [w for q in quoted for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", q)]
    terms = [t for t in quoted + parts + words if t.lower() not in STOPWORDS]
    return list(dict.fromkeys(terms))


def _explain(ctx: Ctx) -> Strategy:
    task = ctx.task
    terms = _terms(task)
    listing = _list_paths((yield Call("list_files", {"pattern": "**/*"})))
    listed = set(listing)
    named = [p for p in PATH.findall(task) if p in listed]
    relevant = [p for p in ctx.listed("Relevant files") if p in listed]
    stems = [p for p in listing if any(t.lower() in p.lower() for t in terms if len(t) > 3)]
    wants_tests = "test" in task.lower()
    ordered = list(dict.fromkeys(named + relevant + stems + [p for p in listing if p.endswith(".py")]))
    ordered = [p for p in ordered if wants_tests or not _is_test(p)][:6]
    texts: dict[str, str] = {}
    yield from _read_all(ordered, texts)
    lowered = [t.lower() for t in terms]
    hits: list[tuple[int, str, int, str]] = []
    for path, text in texts.items():
        for number, line in enumerate(text.splitlines(), 1):
            low = line.lower()
            score = sum(2 if "`" + t in task.lower() else 1 for t in lowered if t in low)
            if score and line.strip():
                hits.append((score, path, number, line.rstrip()))
    named_defs = [w.split(".")[-1] for w in re.findall(r"`([A-Za-z_][\w.]*)`", task)]
    quoted: list[tuple[int, str, int, str]] = []
    for path, text in texts.items():
        for name in named_defs:
            for node in _functions(text).get(name, [])[:1]:
                body = text.splitlines()[node.lineno - 1 : (node.end_lineno or node.lineno)][:MAX_QUOTED]
                quoted += [
                    (99, path, node.lineno + i, line.rstrip()) for i, line in enumerate(body) if line.strip()
                ]
    if not hits and not quoted:
        return "I read " + ", ".join(texts) + " and found nothing that matches the question."
    hits.sort(key=lambda h: (-h[0], h[1], h[2]))
    merged: dict[tuple[str, int], tuple[int, str, int, str]] = {}
    for hit in quoted + hits[:8]:
        merged.setdefault((hit[1], hit[2]), hit)
    top = sorted(merged.values(), key=lambda h: (h[1], h[2]))
    # Files ranked by what matched inside their functions and classes: a package docstring that
    # repeats the task's words is not where the behaviour lives.
    weight: dict[str, float] = {}
    for score, path, number, _line in quoted + hits:
        weight[path] = weight.get(path, 0.0) + score * (1.0 if _enclosing(texts[path], number) else 0.25)
    by_file = sorted(weight, key=lambda p: (-weight[p], p))
    lines = [f"The code this is about is in {', '.join(by_file[:3])}.", ""]
    for _score, path, number, line in top:
        enclosing = _enclosing(texts[path], number)
        where = f" (in `{enclosing}`)" if enclosing else ""
        lines.append(f"- {path}:{number}{where}: `{line.strip()}`")
    return "\n".join(lines)


def _enclosing(source: str, line: int) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                if best is None or node.lineno > best.lineno:
                    best = node
    return best.name if best else None


def _wrong_fix(ctx: Ctx) -> Strategy:
    if ctx.revising or "write_file" not in ctx.tools:
        return (yield from _fix(ctx))
    listing = yield Call("list_files", {"pattern": "**/*.py"})
    files = set(_list_paths(listing))
    failing, _before = yield from _find_failing(ctx, run_first=False)
    texts: dict[str, str] = {}
    candidates = yield from _suspects(failing, texts, files, ctx.listed("Relevant files"))
    if not candidates:
        return "Nothing to change."
    suspect = candidates[0]
    lines = texts[suspect.path].splitlines(keepends=True)
    indent = re.match(r"\s*", lines[suspect.line - 1]).group(0)  # type: ignore[union-attr] - the pattern matches any line, even an empty one
    lines.insert(suspect.line - 1, f"{indent}{MARKER}\n")
    yield Call("write_file", {"path": suspect.path, "content": "".join(lines)})
    return f"Fixed the problem in {suspect.path} around line {suspect.line}."


def _loop(ctx: Ctx) -> Strategy:
    while True:
        yield Call("list_files", {"pattern": "**/*"})


# ---------------------------------------------------------------- the model functions


def _role(make: Callable[[Ctx], Strategy]) -> Callable[[list[ModelMessage], AgentInfo], ModelResponse]:
    def decide(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _is_planner(info):
            return _plan(messages, info)
        return _drive(make, messages, info)

    return decide


fix = _role(_fix)
explain = _role(_explain)
loop = _role(_loop)
wrong_fix = _role(_wrong_fix)
fix_priced = _role(_fix)
fix_priced.priced_as = "gpt-4o"


async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # Async so that the run's timeout cancels the wait, as it would cancel a slow provider's request.
    await anyio.sleep(float(os.environ.get("CODELOOP_SCRIPTED_DELAY_S", "2")))
    return fix(messages, info)


__all__ = ["MARKER", "explain", "fix", "fix_priced", "loop", "slow", "wrong_fix"]
