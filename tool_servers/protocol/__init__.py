"""The tool protocol every server shares: tool specs, the MCP SDK adaptation, the gate (scopes, confirmation, audit), errors and HTTP."""
