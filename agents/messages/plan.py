"""The planner's plan: what to do, in order, and how to tell it is done.

Apart from the step messages (`steps.py`) because a continued task carries its parent's plan in
its submission (`continuation.py`), which the step messages themselves carry.
"""

from bus.messages import Message


class PlanStep(Message):
    """One step of a plan, in the order the planner expects it done."""

    description: str
    """What to do, in a sentence for the coder (and for people reading the result)."""
    files: list[str] = []
    """Repository-relative paths this step expects to touch or read."""


class Plan(Message):
    """The planner's structured plan; a revision says why it replaces the one before."""

    steps: list[PlanStep] = []
    """What to do, in order."""
    hypotheses: list[str] = []
    """Guesses about the cause to check, e.g. "the off-by-one is in `paginate`"."""
    files_of_interest: list[str] = []
    """Repository-relative paths the planner thinks matter; the retriever ranks them up."""
    test_targets: list[str] = []
    """Test files or node ids that should show the task is done."""
    done_criteria: list[str] = []
    """What must be true when the task is done, in words."""
    revision_reason: str | None = None
    """Why this plan replaces the previous one; None for the first plan."""
    fixed: bool = False
    """True for the plan diagnose mode uses when no model is configured."""
