"""The `exec` server: commands, tests and static checks in the sandbox, and the pieces only it uses."""
