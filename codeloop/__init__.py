"""codeloop: the CLI, configuration and the composition root that wires bus, agents, tools and sandbox."""

__version__ = "0.1.0"
