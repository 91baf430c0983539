"""The errors of the CLI and the composition root, one tree.

    CodeloopError
    ├── ConfigError (codeloop.config.errors)     bad configuration: an option, a variable, a file
    ├── PipelineConfigError (codeloop.config.pipelines, ValueError)  a `[pipelines]` table that cannot be read
    ├── UnknownRole (codeloop.wiring.roles, ValueError)  `serve --role` names no role this build runs
    ├── ContinueRefused (codeloop.continuing)   a task that cannot be continued: unknown, running, rejected
    ├── EvalError (codeloop.evaluation.errors)   `codeloop eval`'s input is at fault, not a task
    │   ├── TaskSetError                         the task set cannot be read or a task is malformed
    │   └── PreviousRunError                     a --rerun-failed directory has no readable results
    └── SwebenchError (codeloop.swebench.errors) `codeloop swebench`'s input or set-up is at fault

Each is defined next to the code that raises it and keeps its name (callers catch them by it);
this base lets a caller catch "codeloop refused this" in one clause. The CLI turns them into
`error: ...` and exit 2 (`codeloop/cli/common.py`). Errors of the packages below keep
their own trees: `bus.errors.BusError`, `agents.errors.AgentError`, `sandbox.errors`,
`tool_servers.search.errors.SearchError`.
"""


class CodeloopError(Exception):
    """Base of the errors the CLI and the composition root raise; the message says what to fix."""
