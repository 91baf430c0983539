"""How `codeloop status` shows tasks: one task's record as a page, all tasks as a list.

The page (`status ID`) is what a person following a submitted task wants to read: where it is,
how it ended, what it changed and what it cost, what it waits for (a confirmation names the
command that answers it), and its report; `--patch` prints the patch alone, ready for `git apply`.
The list (`status`) fits the terminal: a short id prefix (every command takes a unique prefix),
the status, the mode, when it last changed and the start of its text. Piped, it prints one
tab-separated line per task with the whole id, for scripts.
"""

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from codeloop.cli.common import plural

if TYPE_CHECKING:
    from agents.messages import Candidate, TaskState


SHORT_ID = 8
"""Characters of a task id the list shows at least; more when needed to tell two tasks apart."""


def page(state: "TaskState", notes: list[str], *, continued_by: list[str] | None = None) -> str:
    """One task's record as lines of text: `notes` say why it makes no progress, if so;
    `continued_by` names the tasks that continue it."""
    task, result = state.task, state.result
    rows: list[tuple[str, str]] = [("status", _status(state))]
    rows += _chain_rows(state, continued_by or [])
    if state.stage and result is None:
        rows.append(("stage", f"{state.stage} (step {state.step_seq})"))
    rows += [("mode", task.mode), ("repository", task.repo), ("text", _first_line(task.text, 200))]
    rows.append(("created", f"{_when(state.created_at)}, last change {_when(state.updated_at)}"))
    report = result.verification if result is not None else None
    last = state.last_report
    verdict = report.verdict if report is not None else (last.verdict if last is not None else None)
    if verdict:
        rows.append(("verdict", verdict))
    if result is not None and result.failure_class:
        rows.append(("failure", result.failure_class))
    elif state.error:
        rows.append(("failure", _first_line(state.error, 300)))
    if state.files_changed:
        rows.append(("files", ", ".join(state.files_changed)))
    for approval in state.approvals:
        rows.append(("approved", f"{approval.path} by {approval.approved_by}"))
    if state.candidates:
        from agents.orchestrator.report import candidates

        rows.append(
            ("attempts", attempts_line(result.candidates if result is not None else candidates(state)))
        )
    rows.append(("usage", usage_line(result.usage if result is not None else _usage(state))))
    rows += [("note", note) for note in notes]
    width = max(len(name) for name, _ in rows)
    lines = [f"task {state.task_id}"] + [f"  {name:<{width}}  {value}" for name, value in rows]
    if result is not None and result.report:
        lines += ["", "report:", *_indented(result.report)]
    answer = result.answer if result is not None else state.answer
    if answer and (result is None or answer != result.report):
        lines += ["", "answer:", *_indented(answer)]
    if state.patch:
        lines += [
            "",
            f"patch: {plural(len(state.files_changed), 'file')} changed; "
            f"`codeloop status {state.task_id} --patch` prints it",
        ]
    return "\n".join(lines)


def _chain_rows(state: "TaskState", continued_by: list[str]) -> list[tuple[str, str]]:
    """Where the task stands in a chain of continuations: the task it continues (how that one
    ended), the whole chain when longer, the tasks that continue it."""
    rows: list[tuple[str, str]] = []
    continuation = state.task.continuation
    if continuation is not None:
        rows.append(("continues", f"{continuation.parent_task_id} (which ended {continuation.ended})"))
        if len(continuation.chain) > 1:
            rows.append(("chain", " -> ".join([*continuation.chain, state.task_id])))
    if continued_by:
        rows.append(("continued by", ", ".join(continued_by)))
    return rows


def attempts_line(candidates: "list[Candidate]") -> str:
    """`1 failed, 2 failed, 3 passed (chosen)`: each attempt's verdict, and the one chosen."""
    return ", ".join(
        f"{c.attempt} {c.verdict or 'not verified'}" + (" (chosen)" if c.chosen else "") for c in candidates
    )


def usage_line(usage: dict[str, Any]) -> str:
    """`16 model requests, 39,386+2,238 tokens, $0.0123, 38.9 s`."""
    cost = f", ${usage['cost_usd']:.4f}" if usage.get("cost_usd") is not None else ""
    wall = f", {usage['wall_s']:.1f} s" if usage.get("wall_s") else ""
    return (
        f"{plural(int(usage.get('requests', 0)), 'model request')}, {int(usage.get('input_tokens', 0)):,}+"
        f"{int(usage.get('output_tokens', 0)):,} tokens{cost}{wall}"
    )


def listing(states: "list[TaskState]", notes: dict[str, list[str]], *, tty: bool, width: int) -> str:
    """Every task, oldest first: a table that fits `width` columns on a terminal, else one
    tab-separated line per task (`ID STATUS MODE UPDATED TEXT [NOTES]`, whole ids, UTC times)."""
    if not states:
        return "no tasks yet"
    if not tty:
        return "\n".join(
            "\t".join(
                (
                    s.task_id,
                    s.status,
                    s.task.mode,
                    s.updated_at.isoformat(timespec="seconds"),
                    _first_line(s.task.text, 80),
                    "; ".join(notes.get(s.task_id, [])),
                )
            ).rstrip("\t")
            for s in states
        )
    shown = _short_ids([s.task_id for s in states])
    id_width = max(len(i) for i in shown.values())
    status_width = max(len(s.status) for s in states)
    text_width = max(10, width - id_width - status_width - 8 - 8 - 8)
    lines = [f"{'TASK':<{id_width}}  {'STATUS':<{status_width}}  {'MODE':<7}  {'UPDATED':<8}  TEXT"]
    for s in states:
        lines.append(
            f"{shown[s.task_id]:<{id_width}}  {s.status:<{status_width}}  {s.task.mode:<7}  "
            f"{_age(s.updated_at):<8}  {_first_line(s.task.text, text_width)}"
        )
    for s in states:
        lines += [f"{shown[s.task_id]}: {note}" for note in notes.get(s.task_id, [])]
    return "\n".join(lines)


def _status(state: "TaskState") -> str:
    result = state.result
    if result is None:
        return state.status
    how = [result.failure_class] if result.failure_class else []
    if result.verification.verdict:
        how.append(f"verification {result.verification.verdict}")
    return state.status + (f" ({', '.join(how)})" if how else "")


def _usage(state: "TaskState") -> dict[str, object]:
    usage: dict[str, object] = state.usage.model_dump(mode="json")
    usage["wall_s"] = (datetime.now(UTC) - state.created_at).total_seconds()
    return usage


def _short_ids(ids: list[str]) -> dict[str, str]:
    """Each id cut to the shortest prefix of at least `SHORT_ID` characters no other id starts with."""
    short = {}
    for task_id in ids:
        length = SHORT_ID
        while length < len(task_id) and any(o != task_id and o.startswith(task_id[:length]) for o in ids):
            length += 1
        short[task_id] = task_id[:length]
    return short


def _first_line(text: str, limit: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: max(1, limit - 3)] + "..."


def _indented(text: str) -> list[str]:
    return ["  " + line for line in text.rstrip().splitlines()]


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _age(moment: datetime) -> str:
    """`12s ago`, `5m ago`, `3h ago`, `2d ago`: short enough for the list's column."""
    seconds = max(0, int((datetime.now(UTC) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"
