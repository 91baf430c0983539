"""The errors the agents raise, each carrying the failure class the task's result reports.

    AgentError                      failure_class
    ├── ModelSpecError (ValueError)   env.setup     a model name that cannot be resolved: bad syntax,
    │                                               unknown provider, a `function:` file or callable missing
    ├── ModelNameProblem (ValueError) env.setup     the same found before anything starts, from names and
    │   (agents.models.check)                       files alone (no import of pydantic-ai), or credentials unset
    ├── ModelNotConfigured            env.credentials  the provider needs a variable that is not set (API
    │                                               key, base URL) in the worker that runs the step; raised
    │                                               at the first call, not at construction
    ├── ProviderUnavailable           env.infra     rate limit, 5xx, timeout or connection failure that
    │                                               outlasted the retries: not the model's fault
    ├── ProviderRejected              env.setup     the provider refused the request (bad key, unknown model,
    │                                               exhausted quota, malformed request): retrying cannot help
    ├── ProviderRejected …
    │   └── ContextWindowExceeded     model.context the prompt does not fit the model's context window
    │       (agents.models.context)                 (both numbers named), checked before the request or
    │                                               refused by the server
    ├── ModelMisbehaved               agent.format  the model's own output could not be used (unparseable,
    │   │                                           tool retries exhausted)
    │   └── ModelTruncated            model.truncated  the response ran into the output token limit (the
    │                                               model did not stop), cut mid-answer or mid-tool-call
    ├── LocalServerError              env.setup     a `local:` model's llama.cpp server cannot start
    │   (agents.models.local_server)
    ├── CostBudgetExceeded            budget.cost   the step's share of the task's spend limit is used
    │                                               up: refused before the next model request
    ├── LoopDetected                  agent.loop    the coder repeated the same tool calls
    │   (agents.roles.coder)
    ├── StepError                     its own       a step that cannot succeed, with the class it names
    │   (agents.runtime.role)
    ├── PipelineError (ValueError)    env.setup     a pipeline with an unknown kind or role, or stages in
    │   (agents.orchestrator.pipeline)              an impossible order: refused at submission
    ├── _Unusable                     env.setup     why an installed role cannot load (reported by name)
    │   (agents.runtime.plugins)
    ├── KindsLoading                  env.setup     a stage kind's module asked for the installed kinds
    │   (agents.orchestrator.stages)                while they load (the kind is reported broken)
    ├── CannotContinue (ValueError)   env.setup     a task that cannot be continued: still running, rejected,
    │   (agents.continuing)                         no snapshot, a patch or text too large to carry on
    ├── WorkspaceError                (agents.workspace.errors) capture, scratch workspaces, patches
    ├── ReplayError                   (agents.replay.errors) a recording missing or diverged from
    └── VerifierError                 (agents.roles.verifier.errors) a workspace the verifier cannot use

Failure classes are the project's shared vocabulary, kept here as plain strings. Every message is
redacted and trimmed before it is stored on the exception, so printing one is safe.
"""

from typing import ClassVar


class AgentError(Exception):
    """Base of every error an agent raises; `failure_class` says whose fault it was."""

    failure_class: ClassVar[str] = "env.infra"


class ModelSpecError(AgentError, ValueError):
    """A `--model` value that names no usable model (a usage error: exit 2 in the CLI)."""

    failure_class = "env.setup"


class ModelNotConfigured(AgentError):
    """The provider needs an environment variable that is unset; `variable` names it when known."""

    failure_class = "env.credentials"

    def __init__(self, message: str, *, variable: str | None = None) -> None:
        super().__init__(message)
        self.variable = variable


class ProviderUnavailable(AgentError):
    """The provider could not serve the request within the retry policy's attempts."""

    failure_class = "env.infra"

    def __init__(self, message: str, *, attempts: int, status_code: int | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status_code = status_code


class ProviderRejected(AgentError):
    """The provider refused the request; `reason` is one of auth, not_found, quota, context_window,
    bad_request, so a caller can tell a bad key from a request that grew too large."""

    failure_class = "env.setup"

    def __init__(self, message: str, *, reason: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status_code = status_code


class ModelMisbehaved(AgentError):
    """The model answered, but not in a form the agent could use, even after its retries."""

    failure_class = "agent.format"


class ModelTruncated(ModelMisbehaved):
    """The model's response ran into the output token limit: it did not stop."""

    failure_class = "model.truncated"


class CostBudgetExceeded(AgentError):
    """The next model request would start with the task's spend limit already reached."""

    failure_class = "budget.cost"
