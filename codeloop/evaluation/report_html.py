"""`report.html`: one self-contained page, charts as inline SVG drawn here (no script, no network).

Three charts: unresolved tasks by failure class, cost (tokens when no price is known) against
outcome, and resolved/unresolved per kind.
"""

from html import escape

from codeloop.evaluation.report_md import (
    _localisation_line,
    _pct,
    handed_off_note,
    models_line,
    resolved_cell,
)
from codeloop.evaluation.rows import EvalRow
from codeloop.evaluation.summary import Summary

GREEN, RED, BLUE, GREY = "#2e7d32", "#c62828", "#1565c0", "#9e9e9e"
WIDTH = 560


def _bars(title: str, items: list[tuple[str, list[tuple[float, str]]]], *, chart_id: str) -> str:
    """Horizontal stacked bars: each item a label and (value, colour) segments."""
    height = 30 + 26 * max(1, len(items))
    top = max((sum(v for v, _ in segs) for _, segs in items), default=0) or 1
    scale = (WIDTH - 200) / top
    parts = [
        f'<svg id="{chart_id}" class="chart" role="img" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    if not items:
        parts.append(f'<text x="10" y="40" fill="{GREY}">nothing to show</text>')
    for i, (label, segments) in enumerate(items):
        y = 20 + 26 * i
        parts.append(f'<text x="150" y="{y + 14}" text-anchor="end" font-size="12">{escape(label)}</text>')
        x = 160.0
        for value, colour in segments:
            w = value * scale
            if w > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="18" fill="{colour}"/>')
            x += w
        total = sum(v for v, _ in segments)
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 14}" font-size="12">{total:g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _scatter(rows: list[EvalRow], *, chart_id: str) -> str:
    """One dot per task: x the cost (or tokens), y the outcome (resolved above, not below)."""
    priced = any(r["cost_usd"] for r in rows)
    unit = "cost (USD)" if priced else "tokens (no price known)"
    values = [float((r["cost_usd"] if priced else r["tokens"]) or 0) for r in rows]
    top = max(values, default=0) or 1
    height = 170
    parts = [
        f'<svg id="{chart_id}" class="chart" role="img" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(unit)} against outcome</title>",
        f'<line x1="100" y1="140" x2="{WIDTH - 20}" y2="140" stroke="{GREY}"/>',
        '<text x="90" y="44" text-anchor="end" font-size="12">resolved</text>',
        '<text x="90" y="104" text-anchor="end" font-size="12">not resolved</text>',
        f'<text x="{WIDTH - 20}" y="160" text-anchor="end" font-size="12">{escape(unit)}, max {top:g}</text>',
    ]
    for i, (row, value) in enumerate(zip(rows, values, strict=True)):
        x = 110 + (WIDTH - 140) * value / top
        y = (40 if row["resolved"] else 100) + (i % 5) * 3 - 6
        colour = GREEN if row["resolved"] else (RED if row["blame"] != "environment" else GREY)
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y}" r="5" fill="{colour}" fill-opacity="0.8">'
            f"<title>{escape(row['id'])}: {value:g}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def html_report(summary: Summary, rows: list[EvalRow]) -> str:
    low, high = summary["resolved_ci95"]
    classes = [(name, [(float(count), RED)]) for name, count in summary["failure_classes"].items()]
    kinds = [
        (kind, [(float(f["resolved"]), GREEN), (float(f["tasks"] - f["resolved"]), RED)])
        for kind, f in summary["by_kind"].items()
    ]
    table = "".join(
        f"<tr><td>{escape(r['id'])}</td><td>{r['kind']}</td><td>{r['status']}</td>"
        f"<td>{escape(r['failure_class'] or '')}</td><td>{r['blame'] or ''}</td>"
        f'<td class="{"ok" if r["resolved"] else "no"}">{escape(resolved_cell(r))}</td>'
        f"<td>{r['steps']}</td><td>{r['tokens']}</td><td>{r['wall_s']:.1f}</td></tr>"
        for r in rows
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>codeloop eval report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}} td,th{{padding:2px 8px;text-align:left}}
.ok{{color:{GREEN}}} .no{{color:{RED}}} section{{margin:1.5em 0}}</style></head><body>
<h1>codeloop eval report</h1>
<p id="headline"><strong>resolved {summary["resolved"]}/{summary["tasks"]} = {_pct(summary["resolved_rate"])}</strong>
(95% bootstrap interval {_pct(low)} to {_pct(high)}); completed {_pct(summary["completion_rate"])};
human takeover {_pct(summary["human_takeover_rate"])}; average steps {summary["average_steps"]};
checked tests passing {_pct(summary["test_pass_rate"])}; environment failures {summary["environment_failures"]}{escape(handed_off_note(summary))}.</p>
<p id="localisation">{escape(_localisation_line(summary["localisation"]).removeprefix("- "))}</p>
<p>task set <code>{summary["fingerprints"]["taskset"][:12]}</code>, models {escape(models_line(summary["config"]["models"])).replace("`", "")}</p>
<section><h2>Unresolved tasks by failure class</h2>{_bars("failure classes", classes, chart_id="failure-classes")}</section>
<section><h2>Cost against outcome</h2>{_scatter(rows, chart_id="cost-outcome")}</section>
<section><h2>Results per kind</h2>{_bars("per-kind results", kinds, chart_id="per-kind")}</section>
<section><h2>Tasks</h2><table><tr><th>task</th><th>kind</th><th>status</th><th>failure</th><th>blame</th>
<th>resolved</th><th>steps</th><th>tokens</th><th>wall s</th></tr>{table}</table></section>
</body></html>
"""
