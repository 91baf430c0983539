"""`Outcome`: what running one instance gave, as `OUT/instances/<id>/outcome.json` records it."""

from typing import Literal

from pydantic import BaseModel, ConfigDict

Status = Literal["resolved", "unresolved", "error", "empty"]


class Outcome(BaseModel):
    """One instance's result: graded (resolved/unresolved), not evaluated (error) or not run
    (an empty prediction, as the official harness counts it)."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    repo: str
    version: str
    status: Status
    failure_class: str | None = None
    """Why it is an error instance: `env.setup` (the environment did not build), `test.timeout`
    (the tests passed the per-instance timeout, as the official harness counts it),
    `env.infra` (the sandbox or the machine failed)."""
    message: str | None = None
    patch_applied: bool | None = None
    apply_command: str | None = None
    """Which of the official apply commands took the patch."""
    environment: dict[str, object] | None = None
    """The environment's key, Python, whether this run built it, and its build time."""
    env_s: float = 0.0
    """Seconds spent getting the environment (a build, or a cache lookup)."""
    test_s: float = 0.0
    wall_s: float = 0.0
    left_out: list[str] = []
    """Listed tests left out of grading (a gold validation found they cannot run here)."""
    not_passing: list[str] = []
    """Listed tests that did not pass (failed, errored or absent from the log)."""
    why_not_passing: dict[str, str] = {}
    """Per test of `not_passing`: `network` when its failure shows a connection the sandbox
    refused, `no result in the log` when the log never names it, else `fails with the gold patch
    here` (`codeloop.swebench.unrunnable`)."""
    skipped: list[str] = []
    """Listed tests the run skipped (graded as neither passing nor failing)."""
    skipped_steps: list[str] = []
    """Spec steps that cannot run here (system packages)."""
    model_name_or_path: str = ""
    worker: str | None = None
    """Which process ran it, `HOST:PID`: the submitting `codeloop swebench` or a worker (`codeloop
    serve --role swebench`) of a run shared on the bus."""
