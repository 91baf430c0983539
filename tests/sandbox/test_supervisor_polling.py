"""The in-sandbox supervisor stays idle while a command runs: its system calls are charged to the
command (under gVisor each costs 50-160 us), so it must not poll."""

import json
import os
import subprocess
import sys
from pathlib import Path

from sandbox import _supervisor

SUPERVISOR = Path(_supervisor.__file__)


def test_the_cpu_time_check_waits_until_the_limit_could_first_be_reached() -> None:
    """A 300 s limit cannot be used up on every CPU before 300/CPUs seconds; near the limit the
    check runs every 0.25 s, as it always did."""
    cpus = os.cpu_count() or 1
    assert _supervisor._next_cpu_check(10.0, 0.0, 300.0) == 10.0 + 300.0 / cpus
    assert _supervisor._next_cpu_check(10.0, 299.99, 300.0) == 10.25


def test_the_process_backend_supervisor_does_not_busy_poll_while_a_command_sleeps() -> None:
    """It used to spin on select(0) from 0.25 s into every command (a whole CPU for the
    command's life); now it sleeps until the command exits or writes."""
    request = {
        "argv": ["sleep", "1"],
        "timeout_s": 30,
        "output_bytes": 4096,
        "cpu_time_s": 300,
        "rlimits": {},
    }
    before = os.times()
    # stdin stays open until the reply: the supervisor ends a command whose channel closes.
    with subprocess.Popen(
        [sys.executable, "-I", "-S", str(SUPERVISOR), "group"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as supervisor:
        assert supervisor.stdin is not None and supervisor.stdout is not None
        supervisor.stdin.write(json.dumps(request) + "\n")
        supervisor.stdin.flush()
        supervisor.stdout.readline()  # ready
        reply = json.loads(supervisor.stdout.readline())
        supervisor.stdin.close()
    after = os.times()
    assert reply["exit_code"] == 0
    supervisor_cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    # The supervisor's start-up is ~0.05 s of CPU; spinning for the 1 s sleep was 0.8-1 s.
    assert supervisor_cpu < 0.4, f"supervisor used {supervisor_cpu:.2f} s of CPU during a 1 s sleep"
