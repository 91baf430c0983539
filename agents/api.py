"""The public API for plug-in authors: everything a role package imports from codeloop.

    from agents.api import ReviewRequest, RoleContext, StepError, define_role

Names exported here keep their meaning across releases; a name that moves or goes away stays
importable here for at least two minor releases, with a `DeprecationWarning` naming its new home
(docs/custom-roles.md, "What is public"). The modules behind it (`agents.runtime.api`,
`agents.messages`, `agents.orchestrator.stages`) are codeloop's own layout and may move; import
from here.

- Writing a role: `define_role`, `RoleDefinition`, `RoleContext`, `StepError`, `Capability`,
  `RoleDeps`, `ENTRY_POINT_GROUP` (the entry-point group roles are installed under).
- The messages of the built-in stage kinds a role serves (its request, its result), and what they
  carry: the task, its budget, the plan, the context, the patch, review findings.
- Defining a stage kind of one's own (`codeloop.stages`): `StageKind`, where its stage stands
  (`At`), how its result moves the task on (`Advance`, `Revisit`, `End`, with `Emit` events), and the base classes
  of its messages (`StepRequest`, `StepResult`).
"""

from agents.messages import (
    CodeRequest,
    CodeResult,
    Context,
    ContextRequest,
    Finding,
    Plan,
    PlanRequest,
    PlanResult,
    ReviewRequest,
    ReviewResult,
    ReviewRound,
    StepBudget,
    StepRequest,
    StepResult,
    TaskState,
    TaskSubmitted,
    VerificationReport,
)
from agents.orchestrator.io import Emit
from agents.orchestrator.stages.kind import Advance, At, End, Revisit, StageKind
from agents.runtime.api import ENTRY_POINT_GROUP, RoleContext, RoleDefinition, StepError, define_role
from agents.runtime.role import Capability, RoleDeps

__all__ = [
    "ENTRY_POINT_GROUP",
    "Advance",
    "At",
    "Capability",
    "CodeRequest",
    "CodeResult",
    "Context",
    "ContextRequest",
    "Emit",
    "End",
    "Finding",
    "Plan",
    "PlanRequest",
    "PlanResult",
    "Revisit",
    "ReviewRequest",
    "ReviewResult",
    "ReviewRound",
    "RoleContext",
    "RoleDefinition",
    "RoleDeps",
    "StageKind",
    "StepBudget",
    "StepError",
    "StepRequest",
    "StepResult",
    "TaskState",
    "TaskSubmitted",
    "VerificationReport",
    "define_role",
]
