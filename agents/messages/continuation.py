"""A task that goes on from an ended one: what the new task inherits from its parent.

`codeloop continue ID` (and the tasks server's `continue_task`) submits a new `TaskSubmitted`
whose `continuation` names the parent and carries what the new task starts from: the parent's
patch (the scratch workspace's starting point, so the new patch is the combined one against the
same snapshot), its plan (which the planner revises), a compact account of what was tried and
what the verifier said, and the person's new instruction, if any. Everything travels in the
submission, so any worker can take the task and a replay needs nothing but the record.
"""

from pydantic import Field

from agents.messages.approval import Approval
from agents.messages.plan import Plan
from bus.messages import Message

MAX_CONTINUED_PATCH = 512 * 1024
"""Characters of the parent's patch a continuation may carry: every request of the new task
carries the submission, and a NATS message is capped at 1 MiB by default."""
MAX_ACCOUNT = 8 * 1024
"""Characters of the account of the parent (what was tried, what the verifier said)."""


class Continuation(Message):
    """What a continued task inherits from the task it continues (`TaskSubmitted.continuation`)."""

    parent_task_id: str = Field(min_length=1, max_length=128)
    """The task this one continues; its result links back to it as `parent_task_id`."""
    parent_status: str
    """How the parent ended (`handed_off`, `failed`, `cancelled`, `done`, `diagnosed`)."""
    parent_failure_class: str | None = None
    """Why the parent did not finish as done; None when it did."""
    chain: list[str] = []
    """Every earlier task of the chain, oldest first, ending with the parent."""
    instruction: str | None = Field(default=None, max_length=96 * 1024)
    """What the person asks now, in their words; None: go on with the same task."""
    patch: str | None = Field(default=None, max_length=MAX_CONTINUED_PATCH)
    """The parent's patch (against the same snapshot): the new task's workspace starts from it."""
    files_changed: list[str] = []
    """Repository-relative paths the parent's patch touches."""
    plan: Plan | None = None
    """The parent's last plan, revised by the planner in the light of `account` and `instruction`."""
    approvals: list[Approval] = []
    """What a person approved the parent changing (protected paths its patch changes): the combined
    patch keeps those changes, so they are not failed as unapproved again."""
    account: str = Field(default="", max_length=MAX_ACCOUNT)
    """A compact account of the parent from its record: how it ended, what was changed, what the
    coder said, what the verifier said."""

    def brief(self) -> str:
        """The continuation as the planner and the coder read it."""
        parts = [f"This task continues task {self.parent_task_id}, which ended {self.ended}."]
        if self.patch:
            parts.append(
                "Its changes are already in the workspace (" + ", ".join(self.files_changed) + "): build on "
                "them; do not start over."
            )
        if self.account:
            parts.append(self.account)
        if self.instruction:
            parts.append(f"The person now asks:\n{self.instruction}")
        else:
            parts.append("The person asks to go on with the task where it stopped.")
        return "\n\n".join(parts)

    @property
    def ended(self) -> str:
        return self.parent_status + (f" ({self.parent_failure_class})" if self.parent_failure_class else "")
