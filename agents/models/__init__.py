"""How a role gets its model, and how a model name is checked.

- `adapter`: `build_model` and the errors around a run (`model_errors_as_agent_errors`); every
  request metered (`metered`), retried (`retry`), falling back along a chain (`fallback`);
- `names`: a model name (`provider:model`, `function:PATH.py:NAME`) to a pydantic-ai model;
- `check`: whether a name can be resolved, without importing pydantic-ai — the CLI checks every
  name before starting anything, so this package's root imports nothing: a command that refuses
  a bad flag does not pay for pydantic-ai's import.
"""
