"""The progress line on stderr: done/total, resolved / unresolved / error counts and the ETA."""

import sys
import time

from codeloop.swebench.outcome import Outcome


class Progress:
    """Counts finished instances and prints one line per instance (a redrawn bar on a terminal)."""

    def __init__(self, total: int, *, stream=None) -> None:
        self.total = total
        self.done = 0
        self.counts = {"resolved": 0, "unresolved": 0, "error": 0, "empty": 0}
        self.started = time.monotonic()
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()

    def finished(self, outcome: Outcome) -> None:
        self.done += 1
        self.counts[outcome.status] += 1
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.done * (self.total - self.done)
        width = 24
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        line = (
            f"[{bar}] {self.done}/{self.total} resolved {self.counts['resolved']} unresolved "
            f"{self.counts['unresolved']} error {self.counts['error']}"
            + (f" empty {self.counts['empty']}" if self.counts["empty"] else "")
            + f" | ETA {_clock(eta)} | {outcome.instance_id}: {outcome.status}"
            + (f" ({outcome.failure_class})" if outcome.failure_class else "")
        )
        self.stream.write(("\r\x1b[K" if self.tty else "") + line + ("" if self.tty else "\n"))
        if self.tty and self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        if seconds >= 3600
        else f"{seconds // 60}m{seconds % 60:02d}s"
    )
