"""Runs an issue's example statements under a profiler and prints which files' functions ran.

A standalone script, run by the repository's own interpreter inside the sandbox, so it uses the
standard library only and the Python 3.8 language: it imports nothing of codeloop.

    python tracer.py REQUEST.json

REQUEST: {"setup": str, "blocks": [str, ...], "deadline_s": float}. The setup runs first and is
not traced (a session's imports execute half the package and say nothing about the issue); nor
are the example's own import statements, for the same reason. Each other top-level statement of
each block then runs on its own, so a statement that fails (a name the writer defined off-screen,
the very error the issue reports) does not stop the rest; a block that does not parse runs the
lines of it that do. A name the example uses but never defines is looked up in the repository's
own top-level packages (imported untraced, on the first such name): issue writers leave out the
`from pkg import ...` of the very library the issue is about. Failing that, it comes from the
module the repository's own doctests most often import it from (`>>> from pkg.abc import x`,
`>>> import numpy as np`, read on the first name the packages lack): writers leave out what every
example of the project starts with too. The example's own output is discarded. The last line of
stdout is the report, after the marker:

    {"files": {"pkg/mod.py": 3, ...}, "statements": 9, "failed": 2, "timed_out": false,
     "setup_error": null, "resolved": ["Symbol", ...],
     "raised": [{"error": "ValueError", "frames": [{"path": "pkg/mod.py", "line": 7,
                 "function": "spread"}, ...]}, ...]}

`files` counts the distinct functions (code objects of functions, not of module or class bodies)
that ran in each file under the working directory; `resolved` lists the names taken from the
repository's packages or its doctests' imports; `raised` holds, for each failing statement whose
traceback passes through files under the working directory, those frames, innermost first (not for
an ImportError: a missing dependency is the environment's).
"""

import ast
import builtins
import importlib
import io
import json
import os
import re
import signal
import sys
import time

MARKER = "@@codeloop-example-trace@@"
SKIPPED_PACKAGES = ("test", "doc", "bench", "example")
"""Top-level directories by these prefixes are not where an example's names come from."""
MAX_RAISED = 10
"""Failing statements whose traceback is reported."""
MAX_FRAMES = 8
"""Repository frames reported per traceback, innermost first."""
CO_OPTIMIZED = 0x0001
"""Set on functions' code objects only: a module's or class's body runs when it is imported, which
says the example imported it, not that it used it."""


class _Deadline(BaseException):
    """Raised from the timer signal: derived from BaseException so the example cannot catch it
    with a bare `except Exception`."""


def _on_alarm(signum, frame):
    raise _Deadline()


class _Namespace(dict):
    """The example's globals: a name it never defined comes from the repository's packages, else
    from where its doctests import it.

    Top-level statements look names up with LOAD_NAME, which calls `__missing__` on a dict
    subclass before it tries the builtins, so builtins are passed over here explicitly."""

    def __init__(self, roots):
        dict.__init__(self)
        self.roots = roots
        self.packages = None
        self.doctest_imports = None
        self.resolved = []

    def __missing__(self, name):
        if name.startswith("__") or hasattr(builtins, name):
            raise KeyError(name)
        for lookup in (self._from_packages, self._from_doctests):
            found, value = lookup(name)
            if found:
                self[name] = value
                self.resolved.append(name)
                return value
        raise KeyError(name)

    def _from_packages(self, name):
        if self.packages is None:
            self.packages = _import_untraced(_packages(self.roots))
        for package in self.packages:
            try:
                return True, getattr(package, name)
            except Exception:  # a lazy attribute may raise anything
                continue
        return False, None

    def _from_doctests(self, name):
        if self.doctest_imports is None:
            self.doctest_imports = _doctest_imports(self.roots[0])
        module, attribute = self.doctest_imports.get(name, (None, None))
        for imported in _import_untraced([module] if module else []):
            try:
                return True, getattr(imported, attribute) if attribute else imported
            except Exception:  # a lazy attribute may raise anything
                pass
        return False, None


def _packages(roots):
    names = []
    for root in roots:
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        for entry in entries:
            if entry.startswith(".") or entry.lower().startswith(SKIPPED_PACKAGES):
                continue
            if os.path.isfile(os.path.join(root, entry, "__init__.py")) and entry.isidentifier():
                names.append(entry)
    return names


_DOCTEST_IMPORT = re.compile(
    r"^[ \t]*>>>[ \t]+(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+([\w, \t]+?)|import[ \t]+([\w.]+)(?:[ \t]+as[ \t]+(\w+))?)[ \t]*$",
    re.M,
)


def _doctest_imports(root):
    """name -> (module, attribute or None): where the doctests under `root` most often import each
    name from (`>>> from pkg.abc import x`, `>>> import numpy as np`)."""
    counts = {}
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
        for file_name in files:
            if not file_name.endswith(".py"):
                continue
            try:
                with open(os.path.join(directory, file_name), encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError:
                continue
            if ">>>" in text:
                for m in _DOCTEST_IMPORT.finditer(text):
                    for imported in _imported_names(m):
                        counts[imported] = counts.get(imported, 0) + 1
    best = {}
    by_frequency = sorted(counts.items(), key=lambda item: (-item[1], item[0][1][0]))  # ties: by module
    for (name, source), _ in by_frequency:
        best.setdefault(name, source)
    return best


def _imported_names(match):
    """(name, (module, attribute or None)) for each name a doctest import line binds."""
    module, names, imported, alias = match.groups()
    if imported:
        if alias:
            return [(alias, (imported, None))]
        top = imported.split(".")[0]  # `import a.b` binds `a`
        return [(top, (top, None))]
    out = []
    for part in names.split(","):
        words = part.split()
        if len(words) == 1:
            out.append((words[0], (module, words[0])))
        elif len(words) == 3 and words[1] == "as":
            out.append((words[2], (module, words[0])))
    return out


def _import_untraced(names):
    saved = sys.getprofile()
    sys.setprofile(None)  # importing runs half the package: no evidence of what the example used
    try:
        packages = []
        for name in names:
            try:
                packages.append(importlib.import_module(name))
            except Exception:  # a package that does not import offers no names
                continue
        return packages
    finally:
        sys.setprofile(saved)


def _is_import(module):
    return all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in module.body)


def _statements(source):
    try:
        body = ast.parse(source).body
    except SyntaxError:
        body = []
        for line in source.split("\n"):
            try:
                body.extend(ast.parse(line.strip()).body)
            except SyntaxError:
                continue
    return [ast.Module(body=[node], type_ignores=[]) for node in body]


def main(request_path):
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    root = os.path.realpath(os.getcwd()) + os.sep
    own_dir = os.path.dirname(os.path.realpath(__file__)) + os.sep  # the tracer is no example code

    def repository_path(file_name):
        """`file_name` relative to the repository, or None for a file outside it (or the tracer)."""
        if file_name.startswith(root) and not file_name.startswith(own_dir):
            return file_name[len(root) :]
        return None

    roots = [root[:-1]] + ([os.path.join(root, "src")] if os.path.isdir(os.path.join(root, "src")) else [])
    for path in reversed(roots):
        sys.path.insert(0, path)
    namespace = _Namespace(roots)
    namespace.update({"__name__": "__main__", "__builtins__": __builtins__})
    report = {
        "files": {},
        "statements": 0,
        "failed": 0,
        "timed_out": False,
        "setup_error": None,
        "resolved": namespace.resolved,
        "raised": [],
    }
    counted = set()
    files = report["files"]

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code not in counted and code.co_flags & CO_OPTIMIZED:
                counted.add(code)
                rel = repository_path(code.co_filename)
                if rel is not None:
                    files[rel] = files.get(rel, 0) + 1

    real_stdout = sys.stdout
    sys.stdout = sys.stderr = io.StringIO()
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        try:
            exec(compile(request.get("setup") or "", "<setup>", "exec"), namespace)
        except Exception as exc:  # the example may still run without it
            report["setup_error"] = f"{type(exc).__name__}: {exc}"
        deadline = time.monotonic() + float(request.get("deadline_s", 10.0))
        for block in request.get("blocks", []):
            for module in _statements(block):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Deadline()
                _run(module, namespace, left, profile, report, repository_path)
                sys.stdout = sys.stderr = io.StringIO()  # the example's output, discarded
    except _Deadline:
        report["timed_out"] = True
    finally:
        sys.setprofile(None)
        signal.setitimer(signal.ITIMER_REAL, 0)
    real_stdout.write("\n" + MARKER + json.dumps(report) + "\n")
    real_stdout.flush()


def _run(module, namespace, left, profile, report, repository_path):
    try:
        code = compile(module, "<example>", "exec")
    except (SyntaxError, ValueError):
        return
    signal.setitimer(signal.ITIMER_REAL, left)
    sys.setprofile(None if _is_import(module) else profile)
    try:
        exec(code, namespace)
        report["statements"] += 1
    except _Deadline:
        raise
    except BaseException as exc:  # SystemExit and KeyboardInterrupt of the example included
        report["statements"] += 1
        report["failed"] += 1
        frames = _repository_frames(exc.__traceback__, repository_path)
        # An import that fails says the environment lacks a dependency, not where the bug is.
        if frames and not isinstance(exc, ImportError) and len(report["raised"]) < MAX_RAISED:
            report["raised"].append({"error": type(exc).__name__, "frames": frames})
    finally:
        sys.setprofile(None)
        signal.setitimer(signal.ITIMER_REAL, 0)


def _repository_frames(tb, repository_path):
    """The traceback's frames in repository files, innermost first, at most `MAX_FRAMES`."""
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        rel = repository_path(code.co_filename)
        if rel is not None:
            frames.append({"path": rel, "line": tb.tb_lineno, "function": code.co_name})
        tb = tb.tb_next
    return frames[::-1][:MAX_FRAMES]


if __name__ == "__main__":
    main(sys.argv[1])
