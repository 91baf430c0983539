"""The configuration's one error: what the developer or the user configured is wrong."""

from codeloop.errors import CodeloopError


class ConfigError(CodeloopError):
    """Bad configuration; the message says what is wrong and how to fix it."""
