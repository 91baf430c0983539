"""The network services a codeloop process runs beside its actors.

    tasks_backend      the tasks server's backend on the bus (`BusTasks`), behind `tool_servers.tasks`
    tasks_server       `codeloop mcp tasks`: the tasks server over stdio or HTTP, on a bus it is given
    hosted_mcp         the tool servers and the tasks server `codeloop serve` hosts over HTTP
    workspace_service  `serve --workspaces`: scratch workspaces and their tools over HTTP MCP
    provider_keys      model-provider credentials kept out of the workspace service's process
    audit_events       tool calls' audit records published as `tool_call` events
    http_app           the one small HTTP app behind health and metrics
    health             liveness and readiness (`/healthz`, `/readyz`)
    metrics            Prometheus metrics fed from the task events (`/metrics`)

They take their configuration as arguments (`codeloop.config` models) and are put together by
the composition root (`codeloop.wiring`); none of them imports the command line or the root.
"""
