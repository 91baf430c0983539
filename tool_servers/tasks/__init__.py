"""The `tasks` MCP server: submit coding tasks and follow them to their patch (see `server.py`)."""
