"""`report.md`: the summary and one line per task, for a person or a pull-request comment."""

from collections.abc import Mapping

from pydantic import JsonValue

from codeloop.evaluation.rows import EvalRow
from codeloop.evaluation.summary import LocalisationRates, Summary


def _num(value: object, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _pct(rate: float) -> str:
    return f"{100 * rate:.1f}%"


def _localisation_line(loc: LocalisationRates) -> str:
    hits = ", ".join(f"{k} {_pct(v)}" for k, v in loc["context_hits"].items())
    answered = ", ".join(f"{k} {_pct(v)}" for k, v in loc["answer_hits"].items())
    return f"- localisation over {loc['tasks']} tasks with gold files: context hits {hits}; answer hits {answered}"


def models_line(models: Mapping[str, JsonValue]) -> str:
    """The run's models (a `ModelNames` as JSON) in words, not as a dict: each role with its model in
    backquotes and its fallbacks after `then`; `none (diagnose mode)` without any."""
    roles = {"default": models.get("default"), "planner": models.get("planner"), "coder": models.get("coder")}
    plugged = models.get("roles")
    roles.update(plugged if isinstance(plugged, dict) else {})
    chains = models.get("fallbacks")
    named: list[str] = []
    for role, name in roles.items():
        if not name:
            continue
        chain = chains.get(role) if isinstance(chains, dict) else None
        fallbacks = chain if isinstance(chain, list) else []
        named.append(f"{role} `{name}`" + "".join(f" then `{other}`" for other in fallbacks))
    return ", ".join(named) or "none (diagnose mode)"


def handed_off_note(summary: Summary) -> str:
    """`; 1 of them handed off by the pipeline`: resolved judges the patch, not how the task ended."""
    count = summary.get("resolved_handed_off", 0)
    return f"; {count} of them handed off by the pipeline" if count else ""


def resolved_cell(row: EvalRow) -> str:
    """`yes`, `no`, or `yes (handed off)`: a resolved task the pipeline did not end `done`."""
    if not row["resolved"]:
        return "no"
    return "yes" if row["status"] in ("done", "diagnosed") else f"yes ({row['status'].replace('_', ' ')})"


def markdown_report(summary: Summary, rows: list[EvalRow]) -> str:
    low, high = summary["resolved_ci95"]
    lines = [
        "# codeloop eval report",
        "",
        f"- task set: `{summary['fingerprints']['taskset'][:12]}`, models: {models_line(summary['config']['models'])}"
        f" (`{summary['fingerprints']['models'][:12]}`), config `{summary['fingerprints']['config'][:12]}`",
        f"- **resolved: {summary['resolved']}/{summary['tasks']} = {_pct(summary['resolved_rate'])}**"
        f" (95% bootstrap interval {_pct(low)} to {_pct(high)}){handed_off_note(summary)}",
        f"- completed: {summary['completed']}/{summary['tasks']} = {_pct(summary['completion_rate'])};"
        f" handed off (human takeover): {summary['handed_off']} = {_pct(summary['human_takeover_rate'])}",
        f"- average steps: {summary['average_steps']}; checked tests passing:"
        f" {summary['tests_passed']}/{summary['tests_checked']} = {_pct(summary['test_pass_rate'])}",
        f"- environment failures: {summary['environment_failures']}",
        _localisation_line(summary["localisation"]),
        "",
        "| figure | p50 | p90 | total |",
        "| --- | --- | --- | --- |",
    ]
    for name, unit in (("cost_usd", "cost (USD)"), ("tokens", "tokens"), ("wall_s", "wall time (s)")):
        spread = summary[name]
        lines.append(f"| {unit} | {_num(spread['p50'])} | {_num(spread['p90'])} | {_num(spread['total'])} |")
    lines += ["", "## By kind", "", "| kind | tasks | resolved | rate |", "| --- | --- | --- | --- |"]
    for kind, figures in summary["by_kind"].items():
        lines.append(
            f"| {kind} | {figures['tasks']} | {figures['resolved']} | {_pct(figures['resolved_rate'])} |"
        )
    lines += ["", "## Failure classes (unresolved tasks)", "", "| class | tasks |", "| --- | --- |"]
    for name, count in summary["failure_classes"].items():
        lines.append(f"| `{name}` | {count} |")
    if not summary["failure_classes"]:
        lines.append("| (none) | 0 |")
    by_blame = summary["failures_by_blame"]
    lines += [
        "",
        "Blame: " + ", ".join(f"{k} {v}" for k, v in by_blame.items()),
        "",
        "## Tasks",
        "",
        "| task | kind | status | failure | blame | resolved | tests | steps | tokens | wall s | trace |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        tests = row.get("tests")
        shown = f"{tests['passed']}/{tests['total']}" if tests else ""
        lines.append(
            f"| {row['id']} | {row['kind']} | {row['status']} | {row['failure_class'] or ''} | {row['blame'] or ''}"
            f" | {resolved_cell(row)} | {shown} | {row['steps']} | {row['tokens']}"
            f" | {row['wall_s']:.1f} | {row['trace_id'] or ''} |"
        )
    return "\n".join(lines) + "\n"
