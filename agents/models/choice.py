"""Which model each LLM role uses: one default plus per-role overrides, merged across layers.

Layers, highest precedence first: the task's own override, the CLI flags (`--model`,
`--planner-model`, `--coder-model`), `CODELOOP_MODEL`, the config file. The caller reads each
layer (the environment included) and passes them in; nothing here reads the environment.

Within a layer a role's own entry beats that layer's default. Across layers, a higher layer's
default beats a lower layer's role entry: `--model X` sets every role, as the CLI promises, even
when the config file names a planner model. No model for a role means diagnose mode for it.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict

LlmRole = Literal["planner", "coder"]
LLM_ROLES: tuple[LlmRole, ...] = ("planner", "coder")


class ModelChoice(BaseModel):
    """Model names for the LLM roles, as one layer of configuration states them."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    default: str | None = None
    """Model for every LLM role this layer does not name (`--model`, `CODELOOP_MODEL`)."""
    planner: str | None = None
    """Model for the planner only (`--planner-model`)."""
    coder: str | None = None
    """Model for the coder only (`--coder-model`)."""

    def for_role(self, role: LlmRole) -> str | None:
        """The role's model name, or None (diagnose mode for that role)."""
        own: str | None = getattr(self, role)
        return own if own is not None else self.default

    @property
    def is_empty(self) -> bool:
        """True when no role has a model: the task runs in diagnose mode."""
        return all(self.for_role(role) is None for role in LLM_ROLES)


def merge_choices(*layers: ModelChoice | None) -> ModelChoice:
    """One choice from `layers`, highest precedence first (task, CLI, environment, config file).

    A missing layer (None) is skipped. Every role of the result is spelled out, so a later merge
    with a higher layer only changes what that layer names.
    """
    present = [layer for layer in layers if layer is not None]
    resolved: dict[str, str | None] = {}
    for role in LLM_ROLES:
        resolved[role] = next((name for layer in present if (name := layer.for_role(role)) is not None), None)
    default = next((layer.default for layer in present if layer.default is not None), None)
    return ModelChoice(default=default, **resolved)
