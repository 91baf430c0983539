"""A person's approval of a high-risk change, kept with the task and with a task continuing it."""

from bus.messages import Message


class Approval(Message):
    """A person's approval of a high-risk change: the coder wrote `path` only because they said yes.

    Kept on the task's record and in its result, and passed to the verifier, which then judges the
    change to `path` on its merits instead of failing it as a protected path."""

    path: str
    """Repository-relative path the approved action changed."""
    approved_by: str
    """Who approved, as their client named them (`alice with codeloop approve`, `alice at the
    terminal`); `a person` when the client named nobody."""
    request_id: str
    """The confirmation request the approval answered."""
    question: str
    """What the person was asked."""
