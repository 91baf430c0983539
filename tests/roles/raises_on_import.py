"""A plug-in module that cannot be imported."""

raise ImportError("No module named 'leftpad' (a dependency the plug-in forgot to declare)")
