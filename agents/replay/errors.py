"""The errors of recording and replay, each with the failure class a replayed step ends with."""

from agents.errors import AgentError


class ReplayError(AgentError):
    """A replay that cannot go on: the recording is missing, or the replayed run asks for more than
    was recorded (its task has diverged too far to follow the recording)."""

    failure_class = "env.setup"


class RecordingMissing(ReplayError):
    """The task (or one of its steps) has no recording in the object store."""
