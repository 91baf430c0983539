"""The command runner that lives inside a sandbox: standard library only, one JSON line in, one out.

The host starts this file once per sandbox (as the container's init under gVisor, as a plain
child process for the `process` backend) and then sends it one request per command on stdin.
Running the commands from a resident process instead of `runsc exec` saves the start-up a
`runsc exec` costs per command and lets the capping, the timeout and the clean-up happen next to the payload:

- stdout/stderr are drained until every writer is gone but only the first and last halves of the
  output cap are kept, so a command printing gigabytes costs the host one bounded JSON line;
- the wall-clock timeout, and under gVisor the CPU-time limit (gVisor 2022 does not enforce
  RLIMIT_CPU), are enforced here by killing every process of the command;
- after the command exits, every process it left behind (daemons included) is killed: as PID 1 of
  the sandbox with `kill(-1, SIGKILL)`; in `group` mode (process backend) as a child subreaper by
  killing every descendant found in /proc;
- the channel is watched during a command too: when stdin closes (the host died, SIGKILL
  included) the command is killed and the supervisor exits at once, which ends the container,
  instead of running the command to its timeout for nobody.

- on request (`{"op": "warm"}`) it keeps a pytest interpreter ready (`warm_pytest.py`, root-owned,
  gVisor only) and starts `warm` test runs in it; while one lives, the clean-up above kills as the
  payload user so it survives (`docs/sandbox.md` says why this is safe).

It must not import anything from codeloop: it runs under whatever interpreter the sandbox has.
"""

import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time

TYPE_CHECKING = False  # typing's, without importing typing: every import costs start-up under gVisor
if TYPE_CHECKING:
    import socket

_MARKER = "\n[codeloop sandbox: {dropped} bytes of {stream} truncated]\n"
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_PDEATHSIG = 1
WARM_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_pytest.py")
_CHANNEL = 0  # stdin: requests come in on it, and its end means the host is gone
# After a short read of a command's output, wait this long (for the command's exit or the
# deadline only) before reading again, so a command that prints a little at a time (pytest's
# progress dots) is read in a few batches instead of one wake-up and two system calls per write.
# A read of half the pipe (64 KiB) or more means the pipe filled up and the writer blocked (a full
# pipe of small writes reads as 65,472 bytes, not 65,536): batching then stops for the rest of the
# command, so a fast writer loses at most one wait. The exit and the deadline are seen at
# once, so the result is not delayed.
OUTPUT_BATCH_S = 0.05
_READ_SIZE = 65536
_RLIMITS = {
    "NPROC": resource.RLIMIT_NPROC,
    "FSIZE": resource.RLIMIT_FSIZE,
    "CPU": resource.RLIMIT_CPU,
    "NOFILE": resource.RLIMIT_NOFILE,
    "AS": resource.RLIMIT_AS,
    "CORE": resource.RLIMIT_CORE,
}


class Capture:
    """Keeps the head and the tail of a stream, counting what was dropped between them."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap - cap // 2
        self.tail_cap = cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_cap:
            self.tail += data
            del self.tail[: max(0, len(self.tail) - self.tail_cap)]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self, name: str) -> str:
        middle = _MARKER.format(dropped=self.dropped, stream=name).encode() if self.dropped else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", errors="replace")


def _limit_child(rlimits: dict[str, int]) -> None:
    for name, value in rlimits.items():
        resource.setrlimit(_RLIMITS[name], (value, value))


def _read_proc(path: str) -> bytes:
    """A small /proc file in three system calls (open, read, close) where the buffered `open()`
    makes seven (fstat, ioctl and lseek too): under gVisor's ptrace platform every system call
    costs many times its native price, and the supervisor's calls are charged to the command it runs."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        return os.read(fd, 4096)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _next_cpu_check(now: float, used: float, limit: float) -> float:
    """When to measure the command's CPU time next: not before its processes could have used up
    what is left of the limit running on every CPU, and at most every 0.25 s.

    A fixed poll would scan /proc (a couple of dozen system calls each time, charged to the command)
    four times a second although a limit of minutes cannot be reached in the first seconds; the
    enforcement is as tight because no command can use CPU faster than all CPUs at once.
    """
    return now + max(0.25, (limit - used) / (os.cpu_count() or 1))


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _read_proc(f"/proc/{entry}/stat")
            if stat:
                parents[int(entry)] = int(stat.rsplit(b")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def _cpu_seconds(me: int, idle: int | None = None) -> float:
    """CPU time of every live process but us (and the idle warm interpreter), plus what our
    reaped children used."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (me, idle):
            stat = _read_proc(f"/proc/{entry}/stat")
            if stat:
                fields = stat.rsplit(b")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
    times = os.times()
    return total + times.children_user + times.children_system


def _spawn(req: dict, rlimits: dict[str, int], identity: dict) -> "subprocess.Popen[bytes] | str":
    """Start the command of `req` in a session of its own, or say why it cannot start (the
    stderr of an exit code 127, as a shell's "command not found")."""
    try:
        return subprocess.Popen(  # pyright: ignore[reportReturnType] - no text mode is asked for: the pipes are bytes
            req["argv"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=req.get("env", {}),
            cwd=req.get("cwd"),
            start_new_session=True,
            preexec_fn=lambda: _limit_child(rlimits),
            **identity,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        filename = getattr(exc, "filename", None)
        if isinstance(exc, FileNotFoundError) and filename == req["argv"][0] and "/" not in str(filename):
            reason = f"no such program on the sandbox's PATH ({req.get('env', {}).get('PATH', '')})"
        elif filename:
            reason = f"{reason}: {filename}"  # names the missing program or working directory
        return f"codeloop sandbox: cannot run {req['argv'][0]!r}: {reason}\n"


def _drain(fd: int) -> None:
    """Read a non-blocking wake-up pipe empty."""
    while True:
        try:
            if not os.read(fd, 4096):
                return
        except BlockingIOError:
            return


class Supervisor:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.me = os.getpid()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        self.wake_r = wake_r
        self.wake_sel = selectors.DefaultSelector()
        self.wake_sel.register(wake_r, selectors.EVENT_READ)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        if mode == "group":
            import ctypes  # only here: every import costs startup time under gVisor

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            signal.signal(signal.SIGTERM, self._terminate)
            # The host's death also ends us (and so the command) between reads of the channel.
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        self.pending = bytearray()
        """Bytes read from the channel but not yet handled (a line arrives in pieces)."""
        self.warm: WarmPytest | None = None
        """The pytest interpreter kept ready for the next test run (gVisor only), if any."""
        self.idle_cpu = 0.0
        """CPU seconds of reaped warm interpreters, which `os.times()` counts as our children's."""
        self.last_kill = 0.0
        """When `kill_all` last ran (monotonic): kills as the payload user are forks, rationed."""

    def read_request(self) -> dict | None:
        """The next request line from the host; None when the channel has closed."""
        while True:
            line, newline, rest = bytes(self.pending).partition(b"\n")
            if newline:
                self.pending = bytearray(rest)
                if line.strip():
                    return json.loads(line)
                continue
            data = os.read(_CHANNEL, _READ_SIZE)
            if not data:
                return None
            self.pending += data

    def channel_closed(self) -> bool:
        """Reads what the host sent during a command; True when it closed the channel instead."""
        try:
            data = os.read(_CHANNEL, _READ_SIZE)
        except BlockingIOError:
            return False
        self.pending += data
        return not data

    def _terminate(self, *_: object) -> None:
        """The host is closing the sandbox: no process of a command may outlive us."""
        self.kill_all(-1)
        os._exit(0)

    def kill_all(self, child: int) -> None:
        self.last_kill = time.monotonic()
        if self.mode == "init":
            if self.warm is not None:
                # kill(-1) as root would take the warm interpreter too: kill as the payload user,
                # who owns every process a command can start (no setuid programs: nosuid mounts
                # and no_new_privs), and cannot signal root's.
                if _kill_all_of(self.warm.uid):
                    return
                self.drop_warm()
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        for _ in range(50):
            pids = _descendants(self.me)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.reap(child)

    def reap(self, child: int) -> None:
        """Reaps every exited process, remembering the main child's wait status."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == child:
                self.child_status = status
            elif self.warm is not None and pid == self.warm.pid:
                self.idle_cpu += usage.ru_utime + usage.ru_stime
                self.warm.close()
                self.warm = None

    def run(self, req: dict) -> dict:
        started = time.monotonic()
        rlimits = {k: int(v) for k, v in req.get("rlimits", {}).items()}
        uid = req.get("uid")
        # As root inside gVisor a payload could signal us or write to our stdout (/proc/1/fd/1);
        # as an unprivileged user it cannot.
        identity = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
        if self.mode == "group" and "NPROC" in rlimits:
            # RLIMIT_NPROC counts every process of the user on the host, not just the command's.
            rlimits["NPROC"] += _processes_of(os.getuid())
        deadline = started + float(req["timeout_s"])
        proc = None
        self.child_status = None
        warm_start = self._start_warm(req, rlimits, deadline) if req.get("warm") else None
        if warm_start is not None:
            pid, out_fd, err_fd = warm_start
        else:
            spawned = _spawn(req, rlimits, identity)
            if not isinstance(spawned, subprocess.Popen):
                return {
                    "exit_code": 127,
                    "stdout": "",
                    "stderr": spawned,
                    "truncated": False,
                    "killed_by": None,
                    "duration_s": time.monotonic() - started,
                }
            proc = spawned
            assert proc.stdout is not None and proc.stderr is not None  # both are PIPE
            pid, out_fd, err_fd = proc.pid, proc.stdout.fileno(), proc.stderr.fileno()
        children_cpu_before = _children_cpu()
        cap = int(req["output_bytes"])
        captures = {out_fd: Capture(cap), err_fd: Capture(cap)}
        killed_by, ended = self._pump(pid, captures, req, started, deadline)
        if self.warm is None or self.last_kill < ended:
            # Once more for good measure, unless a kill as the payload user (a fork, not a system
            # call) already came after the end: kill(-1) signals every process at once (forks
            # wait for it), so nothing of the command can have started since.
            self.kill_all(pid)
        if self.child_status is None:
            _, self.child_status = os.waitpid(pid, 0)
        self.reap(pid)
        status = self.child_status
        if proc is not None:
            assert proc.stdout is not None and proc.stderr is not None  # both are PIPE
            proc.returncode = os.waitstatus_to_exitcode(status)  # stops Popen from waiting on it again
            proc.stdout.close()
            proc.stderr.close()
        else:
            os.close(out_fd)
            os.close(err_fd)
        exit_code, killed_by = self._exit_code(status, killed_by, rlimits, children_cpu_before)
        out, err = captures[out_fd], captures[err_fd]
        return {
            "exit_code": exit_code,
            "stdout": out.text("stdout"),
            "stderr": err.text("stderr"),
            "truncated": bool(out.dropped or err.dropped),
            "killed_by": killed_by,
            "duration_s": time.monotonic() - started,
            "warm": warm_start is not None,
        }

    def _pump(
        self, pid: int, captures: dict[int, Capture], req: dict, started: float, deadline: float
    ) -> tuple[str | None, float]:
        """Capture the command's output until it is drained and the command has exited or was
        killed (timeout, CPU); returns what killed it (None: it exited) and when it ended."""
        out_fd, err_fd = captures
        sel = selectors.DefaultSelector()
        for fd in (out_fd, err_fd, self.wake_r, _CHANNEL):
            sel.register(fd, selectors.EVENT_READ)
        # Only under gVisor (init mode) is the CPU limit measured here; the process backend has
        # RLIMIT_CPU. (Its wake-up time used to be set in both modes but only advanced in init
        # mode, so the process backend busy-polled select(0) from 0.25 s on.)
        cpu_limit = req.get("cpu_time_s") if self.mode == "init" else None
        cpu_before = self.cpu_seconds() if cpu_limit else 0.0
        next_cpu_check = _next_cpu_check(started, 0.0, cpu_limit) if cpu_limit else deadline
        # A warm run may have ended (and been reaped) before it was handed over.
        killed_by, exited, open_fds = None, self.child_status is not None, {out_fd, err_fd}
        ended = time.monotonic() if exited else float("inf")
        batch_until, batching = 0.0, True
        # Until the output is drained and the command has exited (or was killed): a command may
        # close its stdout and keep running.
        while open_fds or not (exited or killed_by):
            now = time.monotonic()
            if not exited and killed_by is None:
                if now >= deadline:
                    killed_by = "timeout"
                elif cpu_limit and now >= next_cpu_check:
                    used = self.cpu_seconds() - cpu_before
                    next_cpu_check = _next_cpu_check(now, used, cpu_limit)
                    if used > cpu_limit:
                        killed_by = "cpu"
                if killed_by:
                    ended = time.monotonic()
                    self.kill_all(pid)
            if killed_by or exited:
                # Whatever still holds the pipes was forked while we killed (a fork bomb races
                # kill(-1)): keep killing until the pipes close. With a warm interpreter each kill
                # is a fork, so not more often than every 50 ms.
                if self.warm is None or now - self.last_kill >= 0.05:
                    self.kill_all(pid)
                timeout, selector = 0.05, sel
            elif now < batch_until:
                timeout, selector = min(batch_until, deadline, next_cpu_check) - now, self.wake_sel
            else:
                timeout, selector = max(0.0, min(deadline, next_cpu_check) - now), sel
            for key, _ in selector.select(timeout):
                fd = key.fd
                if fd == _CHANNEL:
                    if self.channel_closed():
                        # Nobody will read the reply: end the command and everything it started.
                        self.kill_all(pid)
                        os._exit(0)
                    sel.unregister(fd)  # a request during a command waits for the next read
                    continue
                if fd == self.wake_r:
                    _drain(fd)
                    self.reap(pid)
                    if self.child_status is not None and not exited:
                        exited, ended = True, time.monotonic()
                        # The command is done: whatever it left running (daemons holding our
                        # pipes included) goes now, so the pipes reach EOF.
                        self.kill_all(pid)
                    continue
                data = os.read(fd, _READ_SIZE)
                if data:
                    captures[fd].feed(data)
                    if len(data) >= _READ_SIZE // 2:
                        batching = False
                    elif batching:
                        batch_until = now + OUTPUT_BATCH_S
                else:
                    sel.unregister(fd)
                    open_fds.discard(fd)
        sel.close()
        return killed_by, ended

    def _exit_code(
        self, status: int, killed_by: str | None, rlimits: dict[str, int], children_cpu_before: float
    ) -> tuple[int | None, str | None]:
        """The command's exit code as a shell reports it (None when we killed it), and what killed
        it: the process backend learns of its CPU limit only from the signal RLIMIT_CPU sent."""
        if killed_by is not None:
            return None, killed_by
        exit_code = os.waitstatus_to_exitcode(status)
        if exit_code < 0:
            # Killed by a signal nobody here sent (a crash, or the payload killing itself):
            # report it the way a shell does.
            exit_code = 128 - exit_code
        if self.mode == "group" and exit_code in (128 + signal.SIGXCPU, 128 + signal.SIGKILL):
            if rlimits.get("CPU") and _children_cpu() - children_cpu_before >= rlimits["CPU"] - 1:
                return None, "cpu"
        return exit_code, None

    def cpu_seconds(self) -> float:
        """CPU seconds of the command's processes so far (see `_cpu_seconds`), not counting the
        warm interpreter's: it is not the command's while it waits, nor after it died."""
        idle = self.warm.pid if self.warm is not None else None
        return _cpu_seconds(self.me, idle) - self.idle_cpu

    def keep_warm(self, req: dict) -> dict:
        """Have a pytest interpreter ready for test runs of `req`'s interpreter and environment."""
        python, env, uid = req["python"], req.get("env", {}), req.get("uid")
        if self.warm is not None:
            if self.warm.matches(python, env, uid):
                return {"warm": True, "note": ""}
            self.drop_warm()
        why = _why_not_warm(self.mode, python, env, uid)
        if why:
            return {"warm": False, "note": why}
        import socket  # only here: every import costs startup time under gVisor

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = subprocess.Popen(
                [python, WARM_SCRIPT, str(theirs.fileno()), str(uid)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=os.path.dirname(WARM_SCRIPT),
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            ours.close()
            return {"warm": False, "note": f"cannot start {python!r}: {exc}"}
        finally:
            theirs.close()
        assert uid is not None  # _why_not_warm refused to keep one warm without a payload user
        self.warm = WarmPytest(proc, ours, python, env, uid)
        return {"warm": True, "note": ""}

    def drop_warm(self) -> None:
        """Kill the warm interpreter; its death is reaped with the rest."""
        if self.warm is not None:
            try:
                os.kill(self.warm.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.warm.close()
            self.warm = None

    def _start_warm(self, req: dict, rlimits: dict[str, int], deadline: float) -> tuple[int, int, int] | None:
        """Start the test run `req` in the warm interpreter: its pid and output pipes, or None to
        run it cold (no interpreter for it, or the interpreter is gone)."""
        warm, argv = self.warm, req["argv"]
        if (
            warm is None
            or len(argv) < 3
            or argv[1] not in ("-m", "-c")
            or (argv[1] == "-m" and argv[2] != "pytest")
            or not warm.matches(argv[0], req["env"], req.get("uid"))
            or (req.get("warm") == "if_ready" and not warm.poll_ready())
        ):
            return None
        import select
        import socket  # only here: every import costs startup time under gVisor

        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # Limits by resource number: the interpreter then needs no table of its own.
        limits = [[_RLIMITS[name], value] for name, value in rlimits.items()]
        request = {"args": argv[3:], "cwd": req.get("cwd") or "/", "env": req["env"], "rlimits": limits}
        if argv[1] == "-c":  # a script driving pytest itself (the coverage run): `python -c CODE ARGS`
            request["code"] = argv[2]
        reply = None
        try:
            socket.send_fds(warm.sock, [json.dumps(request).encode()], [out_w, err_w])
            # It may still be importing pytest: wait for it until the command's deadline. Its
            # one "ready" message, sent when the imports are done, may come first.
            while select.select([warm.sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
                data = warm.sock.recv(4096)
                reply = json.loads(data) if data else None
                if not (isinstance(reply, dict) and reply.get("ready") is True):
                    break
                warm.ready, reply = True, None
        except (OSError, ValueError):
            reply = None
        finally:
            os.close(out_w)  # the message carried copies; only the command may hold the write ends
            os.close(err_w)
        pid = reply.get("pid") if isinstance(reply, dict) else None
        if not isinstance(pid, int):
            os.close(out_r)
            os.close(err_r)
            self.drop_warm()
            return None
        self.reap(pid)  # it may have ended already, before it became our child
        return pid, out_r, err_r


class WarmPytest:
    """The supervisor's handle on its warm pytest interpreter (`warm_pytest.py`)."""

    def __init__(
        self, proc: subprocess.Popen, sock: "socket.socket", python: str, env: dict, uid: int
    ) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.sock = sock
        self.python = python
        self.env = dict(env)
        self.uid = uid
        self.ready = False
        """Whether its imports are done (it says so once, before it serves a first request)."""

    def matches(self, python: str, env: dict, uid: int | None) -> bool:
        return python == self.python and env == self.env and uid == self.uid

    def poll_ready(self) -> bool:
        """Whether the interpreter has said it is ready, reading that message if it is waiting."""
        if not self.ready:
            import select

            if select.select([self.sock], [], [], 0)[0]:
                try:
                    data = self.sock.recv(4096)
                    self.ready = bool(data) and json.loads(data).get("ready") is True
                except (OSError, ValueError, AttributeError):
                    self.ready = False
        return self.ready

    def close(self) -> None:
        self.proc.returncode = 0  # reaped by the supervisor's own wait; Popen must not wait too
        self.sock.close()


# Interpreter variables a warm interpreter may start with; any other PYTHON* variable could make
# root import something of the payload's (PYTHONPATH, PYTHONHOME, PYTHONUSERBASE, ...).
_WARM_SAFE_PYTHON_ENV = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8"}


def _why_not_warm(mode: str, python: str, env: dict, uid: int | None) -> str:
    """Why a warm interpreter of `python` may not be started as root, or "" when it may."""
    if mode != "init" or not uid:
        return "warm test runs need the gVisor sandbox, with commands run as the payload user"
    unsafe = sorted(k for k in env if k.startswith("PYTHON") and k not in _WARM_SAFE_PYTHON_ENV)
    if unsafe:
        return f"the environment sets {', '.join(unsafe)}"
    if not os.path.isabs(python):
        return f"{python!r} is not an absolute path"
    # Only a virtualenv without system (and so without user) site-packages: root must import
    # nothing from /tmp, where a payload's ~/.local would be (HOME is /tmp).
    config = os.path.join(os.path.dirname(os.path.dirname(python)), "pyvenv.cfg")
    try:
        with open(config, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return f"{python!r} is not a virtualenv's interpreter"
    settings = {k.strip().lower(): v.strip().lower() for k, _, v in (line.partition("=") for line in lines)}
    if settings.get("include-system-site-packages", "false") != "false":
        return f"{python!r} includes system site-packages"
    return ""


def _kill_all_of(uid: int) -> bool:
    """`kill(-1, SIGKILL)` as `uid`: every process of that user but none of root's. False when
    the helper could not take that identity (nothing was killed)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            code = 0
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # no process of that user was left
        finally:
            os._exit(code)  # whatever happened: this copy of the supervisor must not go on
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return True
    return os.waitstatus_to_exitcode(status) == 0


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "init"
    supervisor = Supervisor(mode)
    out = sys.stdout
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    # The channel is read unbuffered (not through sys.stdin), so what the supervisor has read is
    # exactly what `pending` holds when it watches the channel during a command.
    while (request := supervisor.read_request()) is not None:
        if request.get("op") == "warm":
            reply = supervisor.keep_warm(request)
        else:
            reply = supervisor.run(request)
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if request.get("warm") and supervisor.warm is None:
            # After the reply, so the host goes on meanwhile: the next test run starts warm.
            supervisor.keep_warm(
                {"python": request["argv"][0], "env": request["env"], "uid": request.get("uid")}
            )


if __name__ == "__main__":
    main()
