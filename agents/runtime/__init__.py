"""What every role runs on, built-in or plug-in alike.

api.py            the role API: `define_role`, `RoleDefinition` (name, kind, handler, grant, the
                  capabilities it needs), `RoleContext`
role.py           the worker's dependencies (`RoleDeps`, `Capability`), how a step fails
                  (`StepError`), the role's actor (`role_spec`)
plugins.py        the installed roles: the `codeloop.roles` entry points, broken ones reported
builtin.py        the built-in roles' definitions, installed under that group like a plug-in's
metering.py       an LLM role's metered model, its calls as events, its usage
tracing.py        the spans of the orchestrator's handlings, the roles' runs and model calls
tools.py          how roles reach the tool servers: MCP targets under a grant (`ToolProvider`)
confirmations.py  a person's approval of a high-risk tool call, across processes
"""
