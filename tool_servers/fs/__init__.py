"""The `fs` server: read, list, search and patch files under one root."""
