"""Runs an issue's example statements one by one and reports what each did (run in the sandbox).

A standalone script, run as `python -c SOURCE REQUEST_JSON` with the project's interpreter in the
root: it imports nothing of codeloop and keeps to syntax Python 3.6 reads, since the project's
interpreter may be that old. Each top-level statement runs on its own in one namespace, an
expression as the interactive interpreter runs it (its value's repr printed), with its printed
output captured; one that raises is recorded (type, first line of the message, whether the
traceback passes through the repository's code) and the next statement runs. The report is one
JSON line after `MARKER` on the real standard output.

An expression's value is shown as a notebook shows it, too: after its repr, the rich forms its
type defines (`_repr_html_`, `_repr_svg_`, `_repr_png_`, `_repr_jpeg_`) are computed, which is
where many objects do their work (a plot drawn for its picture): an issue written in Jupyter
reports what that display raised.

Issues often leave out their imports (`so.Plot(...)`, `np.array(...)`): a statement that raises
`NameError` for a name the example never binds runs once more after the import statement that
binds that name most often in the repository's own files (`import seaborn.objects as so`, read
from its tests and docs), which the statement's report names (`bound`).
"""

import ast
import collections
import functools
import io
import json
import os
import re
import signal
import sys
import traceback

MARKER = "@@codeloop-example@@"
MAX_OUTPUT = 2000
MAX_STATEMENTS = 200
MAX_SCANNED_FILES = 5000
SCANNED_SUFFIXES = (".py", ".rst", ".md", ".txt", ".ipynb")
SKIPPED_DIRS = ("site-packages", "node_modules", "build", "dist", "__pycache__")
_UNBOUND = re.compile(r"name '(\w+)' is not defined")
_IMPORT_AS = re.compile(r"^(?:>>> |\.\.\. )?\s*import ([\w.]+) as (\w+)\s*$")
_IMPORT = re.compile(r"^(?:>>> |\.\.\. )?\s*import (\w+)\s*$")
_FROM_IMPORT = re.compile(r"^(?:>>> |\.\.\. )?\s*from ([\w.]+) import ([\w, ]+?)\s*$")
RICH_FORMS = ("_repr_html_", "_repr_svg_", "_repr_png_", "_repr_jpeg_")


class _Deadline(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Deadline()


def _statements(block):
    """(first line of its source, module of one statement) for each statement of `block`; a block
    that does not parse is taken line by line, keeping the lines that do."""
    try:
        body = ast.parse(block).body
        lines = block.split("\n")
        return [(lines[node.lineno - 1].strip(), node) for node in body]
    except SyntaxError:
        found = []
        for line in block.split("\n"):
            try:
                found.extend((line.strip(), node) for node in ast.parse(line.strip()).body)
            except SyntaxError:
                continue
        return found


def _display(value):
    """`sys.displayhook` as a notebook's: the repr printed, then each rich form the value's type
    defines computed (looked up on the type, as IPython does, so an object answering every
    attribute is not taken for one that has them)."""
    if value is None:
        return
    print(repr(value))
    for name in RICH_FORMS:
        if callable(getattr(type(value), name, None)):
            getattr(value, name)()


@functools.lru_cache(maxsize=None)  # noqa: UP033 - functools.cache is 3.9+, the project may run 3.6
def _repository_imports(root):
    """Every import statement line of the repository's own files, with the names it binds
    (read once per run, at most `MAX_SCANNED_FILES` files)."""
    found = collections.Counter()
    for path in _scanned_files(root):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(1 << 20)
        except OSError:
            continue
        for line in text.replace("\\n", "\n").replace('\\"', '"').split("\n"):
            found.update(_bindings(line.strip().strip('",')))
    return found


def _scanned_files(root):
    """The repository's source and documentation files, in a stable order, the walk ending at
    `MAX_SCANNED_FILES`."""
    scanned = 0
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(SCANNED_SUFFIXES):
                if scanned >= MAX_SCANNED_FILES:
                    return
                scanned += 1
                yield os.path.join(directory, name)


def _bindings(line):
    """(import statement, name it binds) for each name an import line binds; none for another line."""
    match = _IMPORT_AS.match(line)
    if match:
        return [(f"import {match.group(1)} as {match.group(2)}", match.group(2))]
    match = _IMPORT.match(line)
    if match:
        return [("import " + match.group(1), match.group(1))]
    match = _FROM_IMPORT.match(line)
    if not match:
        return []
    found = []
    for part in match.group(2).split(","):
        words = part.split()
        if len(words) == 1 or (len(words) == 3 and words[1] == "as"):
            found.append((f"from {match.group(1)} import {' '.join(words)}", words[-1]))
    return found


def _binding(name, root):
    """The import statement binding `name` most often in the repository, or None."""
    counts = [(n, statement) for (statement, bound), n in _repository_imports(root).items() if bound == name]
    return max(counts)[1] if counts else None


def _causes(exc):
    """The type names of the exceptions `exc` was raised from or while handling, nearest first:
    a project that wraps an error (`raise PlotSpecError(...) from err`) still shows the issue's."""
    names, seen = [], {id(exc)}
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen and len(names) < 10:
        seen.add(id(cause))
        names.append(type(cause).__name__)
        cause = cause.__cause__ or cause.__context__
    return names


def _in_repository(tb, root, own):
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        # `<example>`, `<string>`: the example's own code and this runner, never the project's.
        name = os.path.realpath(filename) if not filename.startswith("<") else filename
        if name.startswith(root) and name != own and "site-packages" not in name:
            return True
        tb = tb.tb_next
    return False


def _run(source, node, namespace, root, own):
    """One statement's outcome; once more after the repository's import of a name it lacks."""
    outcome = _run_once(source, node, namespace, root, own)
    kind, _, message = (outcome.get("raised") or "").partition(": ")
    unbound = _UNBOUND.match(message) if kind == "NameError" else None
    if not unbound or unbound.group(1) in namespace:
        return outcome
    statement = _binding(unbound.group(1), root)
    if statement is None:
        return outcome
    try:
        exec(compile(statement, "<example>", "exec"), namespace)
    except Exception:
        return outcome
    outcome = _run_once(source, node, namespace, root, own)
    outcome["bound"] = statement
    return outcome


def _run_once(source, node, namespace, root, own):
    single = isinstance(node, ast.Expr)
    module = ast.Interactive(body=[node]) if single else ast.Module(body=[node], type_ignores=[])
    outcome = {"source": source[:300], "raised": None, "in_repository": False, "output": ""}
    captured = io.StringIO()
    sys.stdout = sys.stderr = captured
    sys.displayhook = _display
    try:
        code = compile(module, "<example>", "single" if single else "exec")
        exec(code, namespace)
    except _Deadline:
        raise
    except BaseException as exc:  # SystemExit and KeyboardInterrupt of the example included
        message = str(exc).strip().split("\n")[0][:300]
        outcome["raised"] = type(exc).__name__ + (": " + message if message else "")
        outcome["in_repository"] = _in_repository(exc.__traceback__, root, own)
        outcome["import_error"] = isinstance(exc, ImportError)
        outcome["traceback"] = "".join(traceback.format_exception_only(type(exc), exc))[-500:]
        outcome["causes"] = _causes(exc)
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        sys.displayhook = sys.__displayhook__
    outcome["output"] = captured.getvalue()[-MAX_OUTPUT:]
    return outcome


def main(request):
    root = os.path.realpath(os.getcwd()) + os.sep
    own = os.path.realpath(__file__) if "__file__" in globals() else "<string>"
    for path in reversed([root[:-1], os.path.join(root, "src")]):
        if os.path.isdir(path):
            sys.path.insert(0, path)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    report = {"statements": [], "timed_out": False}
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(request.get("deadline_s", 30.0)))
    try:
        for block in request.get("blocks", []):
            for source, node in _statements(block):
                if len(report["statements"]) >= MAX_STATEMENTS:
                    break
                report["statements"].append(_run(source, node, namespace, root, own))
    except _Deadline:
        report["timed_out"] = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    out = sys.__stdout__ or sys.stdout
    out.write("\n" + MARKER + json.dumps(report) + "\n")
    out.flush()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
