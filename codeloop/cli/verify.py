"""`codeloop verify`: judge a patch from anywhere (another agent, a person) as the verifier judges
a coder's patch, on a copy of the checkout (`codeloop.wiring.judge`).

Exit codes: 0 `passed`, 1 `failed`, 3 `unverified`, 2 usage (a repository that is not a
directory, an unreadable or empty patch, a blank task). The checkout is only read.
"""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from codeloop.cli.common import fail, read_text_argument, usage_error
from codeloop.cli.connection import run_async

if TYPE_CHECKING:
    from agents.messages import VerificationReport
    from codeloop.wiring.judge import PatchToJudge


EXIT_BY_VERDICT = {"passed": 0, "failed": 1, "unverified": 3}
MAX_PATCH_BYTES = 32 * 1024 * 1024
MAX_TASK_BYTES = 1024 * 1024
SHOWN_FAILURES = 10


def verify(
    patch: Annotated[str, typer.Argument(help="The patch: a unified diff file, or - for stdin.")],
    repo: Annotated[
        Path, typer.Option("--repo", help="The checkout the patch is against (only read, never written).")
    ],
    task: Annotated[
        str,
        typer.Option(
            "--task", help="What the patch is meant to do, in words; @FILE for a file's text, - for stdin."
        ),
    ],
    mode: Annotated[
        str, typer.Option("--mode", help="The task's mode, as for `codeloop run`: write or execute.")
    ] = "execute",
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds the whole verification may take.")
    ] = 1800.0,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the verification report as JSON (the `verification` object of run --json, and more).",
        ),
    ] = False,
) -> None:
    """Verify PATCH against the checkout at --repo for --task and print the verification report.

    The checkout's working tree is copied into a scratch directory and the patch judged there as
    codeloop judges its own coder's patch: the starting tree's tests, then the patch's, in the
    sandbox. `passed` means the task's problem was shown fixed (a failing test that now passes,
    a reproduction test, the task's example); passing tests alone give `unverified`.
    Exit 0 passed, 1 failed, 3 unverified, 2 usage errors.
    """
    from codeloop.wiring.judge import PatchToJudge

    if mode not in ("write", "execute"):
        raise usage_error(f"--mode {mode!r}: verify takes write or execute (a read-mode task has no patch)")
    if task == "-" and patch == "-":
        raise usage_error("--task - and PATCH - both read stdin: give one of them as a file")
    if not repo.is_dir():
        raise usage_error(f"--repo {repo}: not a directory")
    text = read_text_argument(task, what="task text", max_bytes=MAX_TASK_BYTES)
    if not text.strip():
        raise usage_error("the task text is blank: say what the patch is meant to do")
    diff = read_text_argument(patch if patch == "-" else f"@{patch}", what="patch", max_bytes=MAX_PATCH_BYTES)
    if not diff.strip():
        raise usage_error(f"the patch ({'stdin' if patch == '-' else patch}) is empty: nothing to verify")
    request = PatchToJudge(repo=repo, task=text, patch=diff, mode=mode, timeout_s=timeout)
    typer.echo(
        f"judging {'the patch on stdin' if patch == '-' else patch} on a copy of {repo}: the starting "
        f"tree's tests, then the patch's, in the sandbox (at most {timeout:g} s)",
        err=True,
    )
    report = _judge(request)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        typer.echo(_human(report))
    raise typer.Exit(EXIT_BY_VERDICT[report.verdict])


def _judge(request: "PatchToJudge") -> "VerificationReport":
    from agents.workspace import WorkspaceError
    from codeloop.config.environment import state_dir_from
    from codeloop.wiring.judge import judge_patch

    try:
        return run_async(lambda: judge_patch(request, state_dir=state_dir_from(None)))
    except WorkspaceError as exc:
        raise fail(f"cannot copy {request.repo} to judge the patch: {exc}") from None


def _human(report: "VerificationReport") -> str:
    """The report for people: the summary, each check, then the failures and the evidence."""
    lines = [report.summary or report.verdict]
    lines += [f"  {'ok ' if c.ok else 'NO '} {c.name}: {c.summary}" for c in report.checks]
    for failure in report.failures[:SHOWN_FAILURES]:
        where = failure.test_id or ":".join(str(p) for p in (failure.path, failure.line) if p) or "-"
        lines.append(f"  {failure.severity} {failure.failure_class} {where}: {failure.message}")
    if len(report.failures) > SHOWN_FAILURES:
        lines.append(f"  ... and {len(report.failures) - SHOWN_FAILURES} more (--json lists them)")
    if report.evidence:
        kind = f" ({report.evidence_kind})" if report.evidence_kind != "none" else ""
        lines.append(f"  failed before, pass with the patch{kind}: {', '.join(report.evidence[:5])}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command(name="verify")(verify)
