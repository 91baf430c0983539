"""Deprecated: the role API's former path; import from `agents.api` instead.

Kept so that a plug-in written against it still loads (with a `DeprecationWarning` naming the new
path); it goes away no earlier than two minor releases after the one that deprecated it
(docs/custom-roles.md, "What is public").
"""

import warnings

from agents.api import *  # noqa: F403 - the whole public API, under its old name
from agents.api import __all__ as _public
from agents.runtime.api import check_handler, result_of

warnings.warn(
    "agents.role_api is deprecated: import from agents.api instead "
    "(e.g. `from agents.api import RoleContext, StepError, define_role`)",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [*_public, "check_handler", "result_of"]  # pyright: ignore[reportUnsupportedDunderAll] - the public names re-exported by the star import above
