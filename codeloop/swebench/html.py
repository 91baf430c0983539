"""codeloop's HTML report of a SWE-bench run: the resolved rate per repository, the time per
instance, and the instances that could not be evaluated (environment failures, not the model's)
apart from those the prediction did not resolve."""

from html import escape

from pydantic import JsonValue

from codeloop.swebench.outcome import Outcome
from codeloop.swebench.report import RepositoryFigures

_STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}"
    ".resolved{color:#070}.unresolved{color:#a50}.error{color:#b00}"
)


def html_report(
    report: dict[str, JsonValue], outcomes: dict[str, Outcome], repositories: dict[str, RepositoryFigures]
) -> str:
    """The page of `report` (what report.json holds) and its `repositories` (`repository_figures`),
    self-contained (no scripts, no outside resources)."""
    figures = report["codeloop"]
    predictions = figures.get("predictions", "") if isinstance(figures, dict) else ""
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>SWE-bench run</title><style>{_STYLE}</style></head><body>",
        "<h1>SWE-bench run</h1>",
        f"<p>Predictions: {escape(str(predictions))}. "
        f"Resolved {report['resolved_instances']} of {report['submitted_instances']} submitted "
        f"({report['total_instances']} instances); unresolved {report['unresolved_instances']}; "
        f"not evaluated (errors) {report['error_instances']}; empty patches {report['empty_patch_instances']}.</p>",
        "<h2>Per repository</h2>",
        _table(
            [
                "repository",
                "instances",
                "run",
                "environment built",
                "resolved",
                "rate",
                "unresolved",
                "errors",
                "seconds",
            ],
            [
                [
                    repo,
                    row.instances,
                    row.run,
                    row.built,
                    row.resolved,
                    f"{100 * row.resolved / row.run:.1f}%" if row.run else "-",
                    row.unresolved,
                    row.errors,
                    f"{row.seconds:.0f}",
                ]
                for repo, row in repositories.items()
            ],
        ),
        "<h2>Not evaluated: environment and harness failures (not the model's)</h2>",
        _table(
            ["instance", "class", "why"],
            [
                [o.instance_id, o.failure_class or "", (o.message or "")[:500]]
                for o in _with(outcomes, "error")
            ],
        ),
        "<h2>Unresolved</h2>",
        _table(
            ["instance", "patch applied", "listed tests not passing"],
            [
                [o.instance_id, "yes" if o.patch_applied else "no", ", ".join(o.not_passing[:10])]
                for o in _with(outcomes, "unresolved")
            ],
        ),
        "<h2>Every instance</h2>",
        _table(
            ["instance", "status", "environment (s)", "tests (s)", "total (s)", "left out of grading"],
            [
                [
                    o.instance_id,
                    o.status,
                    f"{o.env_s:.1f}",
                    f"{o.test_s:.1f}",
                    f"{o.wall_s:.1f}",
                    ", ".join(o.left_out),
                ]
                for o in sorted(outcomes.values(), key=lambda o: o.instance_id)
            ],
        ),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _with(outcomes: dict[str, Outcome], status: str) -> list[Outcome]:
    return sorted((o for o in outcomes.values() if o.status == status), key=lambda o: o.instance_id)


def _table(header: list[str], rows: list[list[object]]) -> str:
    if not rows:
        return "<p>None.</p>"
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"
