"""`codeloop eval`: run a task set through the real pipeline and measure what came out.

One concept per module: `taskset` (loading tasks, copying their repositories, fingerprints),
`runner` (one bus for the whole run, N tasks at once), `checks` (per-task judgement: tests on the
patched copy, localisation hits@k, explanation facts), `summary` (rates, bootstrap interval,
percentiles), `report_md` and `report_html` (the writers). Fields are defined in
docs/evaluation.md.
"""
