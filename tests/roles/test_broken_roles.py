"""Plug-ins that fail, on one serve beside healthy roles: one whose handler raises, one that returns a
malformed result, and broken ones that never load. Each failing task ends with a clear class and
the role's name; the other roles' tasks are unaffected; nothing hangs."""

from pathlib import Path

import anyio
import pytest

from tests.roles.plugin_points import with_samples

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_failing_plug_ins_fail_only_their_own_tasks_with_a_clear_class(tmp_path: Path) -> None:
    from agents.client import watch_task
    from bus.actor import DeliveryPolicy
    from codeloop.testing import running_pipeline

    registry = with_samples()
    assert {"import-fails", "wrong-signature"} <= {b.name for b in registry.broken}
    roles = ("orchestrator", "echo", "sample-coder", "malformed-reviewer", "raising-reviewer", "approver")
    # Two deliveries with a short back-off: a handler that keeps raising is given up in a second.
    policy = DeliveryPolicy(ack_wait_s=10, max_deliver=2, backoff_s=(0.2,))
    # The repository apart from the bus's own store, which changes while a snapshot would read it.
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("x = 1\n")
    async with running_pipeline(tmp_path / "state", roles=roles, registry=registry, policy=policy) as runner:
        results = {}

        async def run(name: str, stages: list[str]) -> None:
            results[name] = await runner.run(f"task {name}", repo, stages=stages, pipeline=name, timeout_s=60)

        async with anyio.create_task_group() as tg:
            for reviewer in ("malformed-reviewer", "raising-reviewer", "approver"):
                tg.start_soon(run, reviewer, ["code:sample-coder", f"review:{reviewer}"])
            tg.start_soon(run, "echo", ["echo:echo"])

        malformed = results["malformed-reviewer"]
        assert (malformed.status, malformed.failure_class) == ("failed", "role.malformed")
        assert "The malformed-reviewer could not finish its step (role.malformed)" in malformed.report
        assert "returned a malformed ReviewResult: verdict:" in malformed.report

        raising = results["raising-reviewer"]
        assert (raising.status, raising.failure_class) == ("failed", "env.infra")
        assert "RuntimeError: the reviewer's rules file is missing" in raising.report
        errors = []
        await watch_task(runner.bus, raising.task_id, errors.append)
        handler_errors = [
            e.payload for e in errors if e.kind == "event" and e.payload["name"] == "handler_error"
        ]
        assert handler_errors and handler_errors[0]["data"]["role"] == "raising-reviewer"

        assert results["approver"].status == "done" and results["approver"].reviews[0].verdict == "approve"
        assert results["approver"].patch and "a + b" in results["approver"].patch
        assert results["echo"].status == "done" and results["echo"].answer == "task echo"
