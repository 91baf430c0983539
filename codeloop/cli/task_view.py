"""How a task looks on the terminal: the live status line while it runs (`run`, `replay`), the
summary once it ended, and the question a high-risk tool call asks the person at the terminal."""

import os
import shutil
import sys
import time
from typing import TYPE_CHECKING

import typer

from codeloop.cli.common import approver
from codeloop.cli.task_page import attempts_line, usage_line

if TYPE_CHECKING:
    from agents.messages import TaskResult
    from bus.connection import Bus
    from bus.envelope import Envelope


class LiveView:
    """One status line on stderr: stage, step, last event, tokens, elapsed."""

    def __init__(self, *, enabled: bool, bus: "Bus | None" = None, ask: bool = False) -> None:
        self.enabled = enabled
        self.bus = bus
        self.ask = ask
        self.started = time.monotonic()
        self.tokens = 0
        self.stage = "submitted"
        self.tty = sys.stderr.isatty()

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        out = f"[{elapsed:6.1f}s] {self.stage:<11} {self.tokens:>7} tok  {text}"
        if self.tty:
            # One line, cut to the terminal's width: a wrapped line cannot be redrawn in place.
            width = _stderr_columns()
            sys.stderr.write("\r\033[K" + out[: max(20, width - 1)])
        else:
            sys.stderr.write(out + "\n")
        sys.stderr.flush()

    def note(self, text: str) -> None:
        """A line that stays on stderr (`note: TEXT`), above the status line."""
        if not self.enabled:
            return
        sys.stderr.write(("\r\033[K" if self.tty else "") + f"note: {text}\n")
        sys.stderr.flush()

    async def on_event(self, envelope: "Envelope") -> None:
        payload = envelope.payload
        if envelope.kind == "event":
            data = payload.get("data") or {}
            if payload.get("name") == "confirmation_requested" and self.ask:
                await self._confirm(envelope.task_id, data)
                return
            if payload.get("name") == "transition" and data.get("status"):
                self.stage = data["status"]
            if payload.get("name") == "model_call":
                self.tokens += int(data.get("input_tokens", 0)) + int(data.get("output_tokens", 0))
            self.line(payload.get("message", "")[:110])
        elif envelope.kind == "dead_letter":
            self.line(f"dead letter: {payload.get('error', '')[:100]}")

    async def _confirm(self, task_id: str, data: dict) -> None:
        """Ask the person at this terminal; anything but yes is a refusal."""
        import anyio

        from agents.runtime.confirmations import answer

        question = data.get("question", "a high-risk action")
        reply = await anyio.to_thread.run_sync(
            lambda: _prompt(f"\n{question} [y/N] "), abandon_on_cancel=True
        )
        approved = reply.strip().lower() in ("y", "yes")
        assert self.bus is not None, "a view that asks is given the bus its answer goes on"
        await answer(
            self.bus,
            task_id,
            approve=approved,
            request_id=data.get("request_id"),
            by=approver("at the terminal of codeloop run"),
        )

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")


def _stderr_columns() -> int:
    """The width of the terminal stderr writes to (stdout may be a pipe), else 80."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns or 80
    except (OSError, ValueError):
        return shutil.get_terminal_size().columns


def _prompt(question: str) -> str:
    try:
        return input(question)
    except EOFError:
        return ""


def summary(result: "TaskResult") -> None:
    """The ended task in words: status, files, verification, usage, report, answer, patch."""
    typer.echo(
        f"task {result.task_id}: {result.status}"
        + (f" ({result.failure_class})" if result.failure_class else "")
    )
    if result.files_changed:
        typer.echo("files changed: " + ", ".join(result.files_changed))
    for approval in result.approvals:
        typer.echo(f"approved: {approval.path} by {approval.approved_by}")
    if result.candidates:
        typer.echo("attempts: " + attempts_line(result.candidates))
    verification = result.verification
    if verification.verdict and result.status == "diagnosed":
        # No patch was judged: these are the checks of the tree as it is, not a verdict.
        typer.echo("checks of the unchanged tree (diagnose mode, no model):")
    elif verification.verdict:
        typer.echo(f"verification: {verification.verdict}")
    if verification.verdict:
        for check in verification.checks:
            typer.echo(
                f"  {'ok  ' if check.get('ok') else 'FAIL'} {check.get('name')}: {check.get('summary', '')}"
            )
        if verification.preexisting:
            typer.echo(
                "  failing before the patch too, not blamed: " + ", ".join(verification.preexisting[:10])
            )
    typer.echo("usage: " + usage_line(result.usage))
    if result.report:
        typer.echo("")
        typer.echo(result.report)
    if result.answer and result.answer != result.report:
        typer.echo("")
        typer.echo(result.answer)
    if result.patch:
        typer.echo("")
        typer.echo(result.patch.rstrip())
