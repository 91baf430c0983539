"""The `git` server: read views of the root's repository and commits onto `codeloop/*` branches."""
