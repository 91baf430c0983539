"""tool_servers: codeloop's MCP tool servers and the tool protocol they share.

Each server (`fs`, `git`, `search`, `exec`, one sub-package each, its tools in `server.py`) is an
independent process over stdio or streamable HTTP (`codeloop mcp SERVER --root DIR ...`), built
from `protocol.spec.ToolSpec`s by `protocol.sdk.build_server`; `serve.py` builds one by name. The protocol promises, for every tool call:

- least privilege: tools outside the granted scopes (server grant ∩ bearer token's scopes)
  are not listed, and calling one is `permission_denied` naming the missing scope;
- validation before effect: arguments are checked against the tool's input model, paths are
  confined to the root (`confinement.Root`), and high-risk calls are confirmed by a human
  through MCP elicitation (`protocol/confirm.py`) — or refused with `needs_confirmation`;
- typed results: structured content matching the declared output schema, or an error result
  whose structured content is `errors.ErrorBody` {type, message, details, trace_id};
- a trace id in every result's `_meta["codeloop/trace_id"]`, and an audit record per call in
  a hash-chained log (`protocol/audit.py`, checked by `codeloop audit verify FILE`).
"""
