"""The one failure taxonomy of codeloop: why a patch, an answer or a whole task did not succeed.

Every failure anywhere in the system (a verifier finding, a limit that ended a task, a sandbox
that broke) names one `FailureClass`. The orchestrator decides on them (retry an environment
failure, send a model failure back to the coder), the result object reports them
(`failure_class`), and the evaluation counts them split by `BLAME`: an `environment` failure is
not the model's fault and is retried, a `model` failure is what the model did, an `ambiguous` one
could be either (a timeout: a slow sandbox or an infinite loop the patch introduced).

The classes, their one-line definitions and their blame are documented in
`docs/failure-classes.md`; `tests/agents/test_failures.py` keeps the two in step.
"""

from enum import StrEnum
from typing import Literal


class FailureClass(StrEnum):
    """Why something failed; the value is the dotted name on the wire."""

    ENV_INFRA = "env.infra"
    ENV_SETUP = "env.setup"
    ENV_CREDENTIALS = "env.credentials"
    PATCH_MALFORMED = "patch.malformed"
    PATCH_APPLY_FAILED = "patch.apply_failed"
    PATCH_EMPTY = "patch.empty"
    PATCH_OUT_OF_SCOPE = "patch.out_of_scope"
    PATCH_TOO_LARGE = "patch.too_large"
    PATCH_DELETED_FILE = "patch.deleted_file"
    PATCH_BINARY = "patch.binary"
    PATCH_GENERATED = "patch.generated"
    PATCH_SECRET = "patch.secret"
    PATCH_PROTECTED_PATH = "patch.protected_path"
    STATIC_SYNTAX = "static.syntax"
    STATIC_LINT = "static.lint"
    TEST_STILL_FAILING = "test.still_failing"
    TEST_REGRESSION = "test.regression"
    TEST_TIMEOUT = "test.timeout"
    TEST_WEAKENED = "test.weakened"
    TEST_NO_REPRODUCTION = "test.no_reproduction"
    TEST_COLLECTION_ERROR = "test.collection_error"
    EXAMPLE_STILL_FAILING = "example.still_failing"
    EXAMPLE_REGRESSION = "example.regression"
    AGENT_LOOP = "agent.loop"
    AGENT_FORMAT = "agent.format"
    MODEL_CONTEXT = "model.context"
    MODEL_TRUNCATED = "model.truncated"
    BUDGET_STEPS = "budget.steps"
    BUDGET_TOKENS = "budget.tokens"
    BUDGET_COST = "budget.cost"
    BUDGET_WALL = "budget.wall"
    BUDGET_REVISIONS = "budget.revisions"
    BUDGET_QUOTA = "budget.quota"
    QUOTA_EXCEEDED = "quota.exceeded"
    VERIFY_UNVERIFIABLE = "verify.unverifiable"
    VERIFY_UNVERIFIED = "verify.unverified"
    ANSWER_UNSUPPORTED = "answer.unsupported"
    REVIEW_REJECTED = "review.rejected"
    ROLE_MALFORMED = "role.malformed"


Blame = Literal["environment", "model", "ambiguous"]

DEFINITIONS: dict[FailureClass, str] = {
    FailureClass.ENV_INFRA: "The sandbox, the bus, a tool server or the model provider failed; retried, not the model's fault.",
    FailureClass.ENV_SETUP: "The repository cannot be tested as it is: dependencies missing, no tests collected, pytest itself broken.",
    FailureClass.ENV_CREDENTIALS: "The worker that ran a step lacks a variable its model needs (an API key, a base URL); the message names it.",
    FailureClass.PATCH_MALFORMED: "The patch is not a readable unified diff.",
    FailureClass.PATCH_APPLY_FAILED: "The patch is a diff but does not apply to the tree the task started from.",
    FailureClass.PATCH_EMPTY: "The patch changes nothing.",
    FailureClass.PATCH_OUT_OF_SCOPE: "The patch changes files the task's mode or plan does not allow (any change in read mode).",
    FailureClass.PATCH_TOO_LARGE: "The patch exceeds the size caps (files or changed lines).",
    FailureClass.PATCH_DELETED_FILE: "The patch deletes a file that is not a test (tests deleted are test.weakened).",
    FailureClass.PATCH_BINARY: "The patch adds or changes a binary or non-regular file (symlink, submodule).",
    FailureClass.PATCH_GENERATED: "The patch adds or changes a generated file (bytecode, build output, egg-info).",
    FailureClass.PATCH_SECRET: "The patch adds what looks like a credential: a known key pattern or a high-entropy token.",
    FailureClass.PATCH_PROTECTED_PATH: "The patch touches a protected path: .git/, .codeloop/, CI configuration.",
    FailureClass.STATIC_SYNTAX: "A file the patch changed no longer parses or compiles.",
    FailureClass.STATIC_LINT: "The patch introduced a correctness finding of the linter (undefined name, invalid comparison...).",
    FailureClass.TEST_STILL_FAILING: "A test the task is about (one that executes the changed code, one the task or plan names, one the patch adds) fails with the patch (when it passed before the patch, it is test.regression).",
    FailureClass.TEST_REGRESSION: "A test that passed on the starting tree fails with the patch.",
    FailureClass.TEST_TIMEOUT: "A test run did not finish within its time limit or the task's deadline.",
    FailureClass.TEST_WEAKENED: "The patch deletes, skips or xfails tests, or removes assertions, instead of fixing the code.",
    FailureClass.TEST_NO_REPRODUCTION: "Nothing showed the problem fixed: no test the task is about went from failing to passing and the task's example (execute mode) does not show the problem gone; tests that execute the change and pass show only that no regression was found.",
    FailureClass.EXAMPLE_STILL_FAILING: "The task's example still fails with the patch as it did on the starting tree: the exception the task shows, or the wrong output it shows.",
    FailureClass.EXAMPLE_REGRESSION: "A statement of the task's example that ran clean on the starting tree raises in the repository's code with the patch.",
    FailureClass.TEST_COLLECTION_ERROR: "A test module cannot be imported because of the project's own code (a syntax error, an exception at import); the failure names the module and the file.",
    FailureClass.AGENT_LOOP: "The model repeated the same tool call or made no progress.",
    FailureClass.AGENT_FORMAT: "The model's output stayed unusable after the retries: malformed tool-call JSON, unknown tools, wrong or missing arguments, empty responses, text where a structured answer was needed.",
    FailureClass.MODEL_CONTEXT: "The prompt does not fit the model's context window; the message names both numbers (a larger context, or a shorter prompt, is needed).",
    FailureClass.MODEL_TRUNCATED: "The model did not stop: its response ran into the output token limit and was cut off, even after the retries.",
    FailureClass.BUDGET_STEPS: "The task used up its model requests.",
    FailureClass.BUDGET_TOKENS: "The task used up its token budget.",
    FailureClass.BUDGET_COST: "The task used up its cost budget.",
    FailureClass.BUDGET_WALL: "The task passed its wall-clock deadline.",
    FailureClass.BUDGET_REVISIONS: "The task used up its revisions without a passing verification.",
    FailureClass.BUDGET_QUOTA: "The principal's daily quota (tokens or cost, from the configuration center) ran out while the task ran.",
    FailureClass.QUOTA_EXCEEDED: "The principal was over a quota of the configuration center when the task was submitted; it never started.",
    FailureClass.VERIFY_UNVERIFIABLE: "Nothing could check the patch: no tests to run and nothing else to judge by, or too little time left before the deadline to run them.",
    FailureClass.VERIFY_UNVERIFIED: "The task required a verified patch (--require-verified) and its verification was unverified: no test executes the changed code.",
    FailureClass.ANSWER_UNSUPPORTED: "A read-mode answer cites files, lines or symbols that do not exist.",
    FailureClass.REVIEW_REJECTED: "A review stage rejected the change; its findings are in the report.",
    FailureClass.ROLE_MALFORMED: "A role answered with a result that does not fit its stage kind's message (a broken plug-in).",
}
"""One line per class; the documentation and the evaluation's tables use these words."""

BLAME: dict[FailureClass, Blame] = {
    FailureClass.ENV_INFRA: "environment",
    FailureClass.ENV_SETUP: "environment",
    FailureClass.ENV_CREDENTIALS: "environment",
    FailureClass.TEST_TIMEOUT: "ambiguous",
    FailureClass.VERIFY_UNVERIFIABLE: "ambiguous",
    FailureClass.VERIFY_UNVERIFIED: "ambiguous",
    FailureClass.BUDGET_WALL: "ambiguous",
    FailureClass.TEST_NO_REPRODUCTION: "ambiguous",
    FailureClass.ROLE_MALFORMED: "environment",
    FailureClass.BUDGET_QUOTA: "environment",
    FailureClass.QUOTA_EXCEEDED: "environment",
    FailureClass.MODEL_CONTEXT: "environment",
    FailureClass.MODEL_TRUNCATED: "model",
    **{
        cls: "model"
        for cls in FailureClass
        if cls.value.split(".")[0] in ("patch", "static", "test", "example", "agent", "answer", "review")
        and cls not in (FailureClass.TEST_TIMEOUT, FailureClass.TEST_NO_REPRODUCTION)
    },
    FailureClass.BUDGET_STEPS: "model",
    FailureClass.BUDGET_TOKENS: "model",
    FailureClass.BUDGET_COST: "model",
    FailureClass.BUDGET_REVISIONS: "model",
}
"""Whose failure each class is: `environment` (retry; never counted against the model), `model`,
or `ambiguous` (a timeout or an exhausted clock can be a slow machine or a looping patch; a patch
with no evidence either way may be right or wrong)."""


def blame(failure_class: FailureClass | str) -> Blame:
    """Whose failure `failure_class` is (see `BLAME`).

    Raises:
        ValueError: not a failure class.
    """
    return BLAME[FailureClass(failure_class)]
