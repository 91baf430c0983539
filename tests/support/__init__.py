"""The private test kit: what several test packages (and the benchmarks) share but role authors do
not need. The public part, for anyone testing a role, is `codeloop.testing` (`make_repo`,
`eventually`, `running_pipeline`).

- `repos`: the repositories the tests start from (`CALC`, `dirty_repo`), made with
  `codeloop.testing.make_repo`;
- `cluster`: the cluster on one machine (3 NATS nodes, an orchestrator, W workers per role as
  separate processes), for `tests/scale/` and `benchmarks/scale_bench.py`;
- `scale_faults`: the fault run on that cluster (nodes and workers killed while tasks run).
"""
