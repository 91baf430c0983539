"""Runs an issue's example statements under a profiler and prints which files' functions ran.

A standalone script, run by the repository's own interpreter inside the sandbox, so it uses the
standard library only and the Python 3.8 language: it imports nothing of codeloop.

    python tracer.py REQUEST.json

REQUEST: {"setup": str, "blocks": [str, ...], "deadline_s": float}. The setup runs first and is
not traced (a session's imports execute half the package and say nothing about the issue). Each
top-level statement of each block then runs on its own, so a statement that fails (a name the
writer defined off-screen, the very error the issue reports) does not stop the rest; a block that
does not parse runs the lines of it that do. The example's own output is discarded. The last line
of stdout is the report, after the marker:

    {"files": {"pkg/mod.py": 3, ...}, "statements": 9, "failed": 2, "timed_out": false,
     "setup_error": null}

`files` counts the distinct functions (code objects of functions, not of module or class bodies)
that ran in each file under the working directory.
"""

import ast
import io
import json
import os
import signal
import sys
import time

MARKER = "@@codeloop-example-trace@@"
CO_OPTIMIZED = 0x0001
"""Set on functions' code objects only: a module's or class's body runs when it is imported, which
says the example imported it, not that it used it."""


class _Deadline(BaseException):
    """Raised from the timer signal: derived from BaseException so the example cannot catch it
    with a bare `except Exception`."""


def _on_alarm(signum, frame):
    raise _Deadline()


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
    sys.path.insert(0, root)
    report = {
        "files": {},
        "statements": 0,
        "failed": 0,
        "timed_out": False,
        "setup_error": None,
    }
    counted = set()
    files = report["files"]

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code not in counted and code.co_flags & CO_OPTIMIZED:
                counted.add(code)
                name = code.co_filename
                if name.startswith(root) and not name.startswith(own_dir):
                    rel = name[len(root) :]
                    files[rel] = files.get(rel, 0) + 1

    real_stdout = sys.stdout
    sys.stdout = sys.stderr = io.StringIO()
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
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
                _run(module, namespace, left, profile, report)
                sys.stdout = sys.stderr = io.StringIO()  # the example's output, discarded
    except _Deadline:
        report["timed_out"] = True
    finally:
        sys.setprofile(None)
        signal.setitimer(signal.ITIMER_REAL, 0)
    real_stdout.write("\n" + MARKER + json.dumps(report) + "\n")
    real_stdout.flush()


def _run(module, namespace, left, profile, report):
    try:
        code = compile(module, "<example>", "exec")
    except (SyntaxError, ValueError):
        return
    signal.setitimer(signal.ITIMER_REAL, left)
    sys.setprofile(profile)
    try:
        exec(code, namespace)
        report["statements"] += 1
    except _Deadline:
        raise
    except BaseException:  # SystemExit and KeyboardInterrupt of the example included
        report["statements"] += 1
        report["failed"] += 1
    finally:
        sys.setprofile(None)
        signal.setitimer(signal.ITIMER_REAL, 0)


if __name__ == "__main__":
    main(sys.argv[1])
