"""A pytest interpreter kept ready inside a gVisor sandbox: imported once, forked for every test run.

Under gVisor's ptrace platform a cold `python -m pytest` spends over a second importing pytest and
its plugins before it looks at a test; this process pays that once per sandbox. The supervisor
starts it as root with the command environment the test runs will have, then hands it one request
per run over a Unix socket (the run's argv, working directory, limits, and its stdout and stderr
pipes as passed descriptors). For each request it forks a child that forks the command and exits,
so the command is re-parented to the supervisor, which reaps it, times it and cleans up after it
exactly as it does a cold command. The command process, before it runs any code that is not the
interpreter's own:

- closes this process's socket (a payload holding it could ask for a root command) and every other
  descriptor but its own stdin (/dev/null), stdout and stderr;
- drops to the payload user and group, with no supplementary groups, which clears its capabilities;
- takes the command's resource limits, its own session, the working directory and environment;
- then runs `pytest` the way `python -m pytest` does (`runpy`, the working directory first on
  sys.path), or, for a `python -c CODE ARGS` request, CODE the way `python -c` does (a fresh
  `__main__`, "" first on sys.path): a script that drives pytest itself, as the verifier's coverage
  run does, then finds pytest already imported.

Why root: a payload process of the same user could otherwise ptrace or signal this interpreter and
plant code in every later test run, and the supervisor's clean-up (`kill(-1)` as the payload user)
must spare it. Root here runs only the interpreter's own code: the supervisor starts it only for a
virtualenv that excludes system and user site-packages, with no PYTHONPATH-like variables, and the
warm-up session below looks only at this read-only directory.

What differs from a cold run: the hash seed is shared by the runs of one sandbox (`random` is
reseeded at each fork), modules that pytest and its plugins import are already imported (whether or
not a repository's configuration disables a plugin) and frozen out of garbage collection, and
/proc/self/cmdline names this file.

It must not import anything from codeloop. Standard library and pytest only.
"""

import atexit
import ctypes
import gc
import importlib
import json
import os
import resource
import runpy
import socket
import sys
import threading
import types

_PR_SET_DUMPABLE = 4
# Variables that would make the warm-up session import or configure something of someone else's.
_WARMUP_DROPPED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
_MAX_REQUEST = 1 << 20


def warm_up(here: str) -> None:
    """Imports pytest and every plugin the environment registers, through one real session.

    A session on this directory (read-only, root's, no test files, no configuration above it)
    goes through the same plugin loading and assertion-rewrite marking as a real run, so the
    plugins' modules are imported the way pytest imports them and a later session does not warn
    that they were imported before it could rewrite them.
    """
    import pytest

    saved_path = list(sys.path)
    saved_env = {name: os.environ.pop(name) for name in _WARMUP_DROPPED_ENV if name in os.environ}
    try:
        pytest.main(["-q", "-p", "no:cacheprovider", "--collect-only", f"--rootdir={here}", here])
    finally:
        sys.path[:] = saved_path
        os.environ.update(saved_env)
        sys.stdout.flush()
        sys.stderr.flush()
    # The first failure a run reports has `inspect` map every loaded module to its real path (a
    # few thousand stat calls for the modules imported here, a fifth of a second under gVisor); it
    # caches that per module, so doing it once here leaves each run only its own modules to map.
    import inspect

    nowhere = os.path.join(here, "warm.py")
    inspect.getmodule(compile("", nowhere, "exec"), nowhere)


def _become_command(
    request: dict, control: socket.socket, out_fd: int, err_fd: int, uid: int, libc: ctypes.CDLL
) -> None:
    control.close()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                os.close(int(name))
            except OSError:  # the listing's own descriptor, closed by now
                pass
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # Changing identity makes a process undumpable; a cold command (exec'd after the change)
    # is dumpable, and tests may read their own /proc entries or attach a debugger to children.
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    for limit, value in request["rlimits"]:
        resource.setrlimit(int(limit), (int(value), int(value)))
    os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    args = list(request["args"])
    if "code" in request:
        sys.path[0] = ""  # what `-c` puts first
        sys.argv = ["-c", *args]
        sys.orig_argv = [sys.executable, "-c", request["code"], *args]
    else:
        sys.path[0] = os.getcwd()  # what `-m` puts first
        sys.argv = ["-m", *args]  # runpy puts pytest/__main__.py in place of the first
        sys.orig_argv = [sys.executable, "-m", "pytest", *args]
    importlib.invalidate_caches()


def _run_command(request: dict, control: socket.socket, fds: list[int], uid: int, libc: ctypes.CDLL) -> None:
    """In the command process: set it up, then run pytest; pytest's SystemExit ends the process."""
    try:
        _become_command(request, control, fds[0], fds[1], uid, libc)
    except BaseException as exc:  # the command could not be set up: say so, as a shell would
        os.write(2, f"codeloop sandbox: cannot start the test run: {exc!r}\n".encode())
        os._exit(127)
    try:
        if "code" in request:
            _run_code(request["code"])
        else:
            runpy._run_module_as_main("pytest", alter_argv=True)  # pyright: ignore[reportAttributeAccessIssue] - private, but what `python -m pytest` runs
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc)
    except BaseException as exc:  # what the interpreter does with an uncaught exception
        sys.excepthook(type(exc), exc, exc.__traceback__)
        code = 1
    _finish(code)


def _run_code(code: str) -> None:
    """`python -c CODE`: CODE as the body of a new `__main__` module."""
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    exec(compile(code, "<string>", "exec"), main.__dict__)


def _exit_status(exc: SystemExit) -> int:
    """The exit status the interpreter would give for `exc` (printing a message, as it does)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        sys.stderr.write(f"{exc.code}\n")
    except Exception:
        pass
    return 1


def _finish(code: int) -> None:
    """End the command as interpreter shutdown would, up to what a test can observe: wait for its
    non-daemon threads, run its atexit callbacks (weakref finalizers included), flush the standard
    streams. Tearing down the hundreds of modules imported here (which a cold run pays for too)
    would only cost time."""
    try:
        threading._shutdown()  # pyright: ignore[reportAttributeAccessIssue] - private, but what the interpreter calls at exit
    except Exception:
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120  # what the interpreter exits with when it cannot flush
    os._exit(code)


def _spawn(request: dict, control: socket.socket, fds: list[int], uid: int, libc: ctypes.CDLL) -> None:
    """Fork the command through an intermediate child, so the command's parent is the supervisor."""
    read_pid, write_pid = os.pipe()
    middle = os.fork()
    if middle == 0:
        command = -1
        try:
            os.close(read_pid)
            command = os.fork()
        except BaseException:
            os._exit(1)
        if command == 0:
            os.close(write_pid)
            _run_command(request, control, fds, uid, libc)
        try:
            os.write(write_pid, str(command).encode())
        finally:
            os._exit(0)
    os.close(write_pid)
    data = b""
    while chunk := os.read(read_pid, 64):
        data += chunk
    os.close(read_pid)
    os.waitpid(middle, 0)  # the command is the supervisor's child from here on
    for fd in fds:
        os.close(fd)
    control.sendall(json.dumps({"pid": int(data) if data else None}).encode())


def serve(control: socket.socket, payload_uid: int) -> None:
    """Start a command per request, as `payload_uid` (fixed when the supervisor started us)."""
    libc = ctypes.CDLL(None, use_errno=True)
    while True:
        message, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST, 2)
        if not message:
            return
        why = ""
        if len(fds) != 2 or payload_uid == 0:
            why = "bad request"
        elif threading.active_count() != 1:  # a fork would copy a half-held lock
            why = "threads are running"
        if why:
            for fd in fds:
                os.close(fd)
            control.sendall(json.dumps({"pid": None, "error": why}).encode())
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        _spawn(json.loads(message), control, fds, payload_uid, libc)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    payload_uid = int(sys.argv[2])
    warm_up(os.path.dirname(os.path.abspath(__file__)))
    # What the imports made lives as long as the interpreter: keep it out of every later
    # collection. pytest collects twice at the end of each run (to report unraisable exceptions),
    # which over this heap was a quarter of a warm one-test run; objects a run makes are still
    # collected as usual.
    gc.freeze()
    # Said once: the supervisor may prefer a cold start to waiting for the imports above.
    control.sendall(json.dumps({"ready": True}).encode())
    serve(control, payload_uid)


if __name__ == "__main__":
    main()
