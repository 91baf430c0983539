"""The user's own MCP servers behind codeloop's gate: a relay server per server.

A relay is an in-process MCP server (`sdk.build_server`, so the same `Gate` as every codeloop
server) that offers the tools of one upstream server — a program started over stdio, or a
Streamable HTTP URL — as `NAME__TOOL` with the upstream's own input schemas. Each call passes the
gate (the grant's scopes, a person's confirmation where the configuration asks for one, the audit
log), is forwarded with a deadline, and its output is redacted (`redaction`) and capped before it
goes back, so a secret a server prints reaches neither the model nor events, traces or
recordings. An upstream that is down, or dies mid-task, makes its calls `unavailable` tool
errors; the session that uses the relay carries on.

    upstream.py  the connection to one upstream server, owned by a task of its own
    server.py    the relay server of one upstream, and `open_relays` for a set of them
"""
