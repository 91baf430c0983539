"""tool_servers."""
