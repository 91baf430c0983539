"""codeloop: the CLI, configuration and the composition root that wires bus, agents, tools and sandbox."""

from importlib.metadata import version

# One version source: pyproject.toml's, as the installed metadata carries it.
__version__ = version("codeloop")
