"""What the agent pipeline itself costs per task, with a model that answers instantly.

For a small repository and a generated 1,000-file one, each task is run three ways, interleaved
over rounds so a noisy machine hurts all alike:

1. through the pipeline: snapshot, submission, the orchestrator and the four roles as actors on
   an embedded nats-server, every step a bus hop with KV writes;
2. by direct calls: the same role functions called one after the other in this process on the same
   snapshot, with no orchestrator, no hops, no records;
3. through the pipeline with one more stage, `review:noop-reviewer` before verification: a plug-in
   review role (defined with the role API, as any plug-in is) that approves at once, so what it
   adds per task is the stage's own cost — a dispatch, a bus hop each way, the record's writes.

The scripted model decides instantly (it reads a file, fixes `a - b`, ends), so every second
printed is plumbing: snapshot, scratch workspaces, MCP sessions, indexing, the sandbox and the
tests it runs. Both paths verify in a workspace their verifier prepared ahead (`VerifierSpares`,
as `codeloop serve` does); before each task the bench waits, untimed, until both are ready, as a
worker's idle time or its model's thinking would. Per stage the script prints the pipeline's time
(between the stage's transition events) beside the direct call's, and the difference, which is the
bus's own share.

    .venv/bin/python benchmarks/pipeline_bench.py [--rounds 3] [--big-files 1000]
"""

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

from agents.client import submit_task, watch_task
from agents.messages import (
    CodeRequest,
    ContextRequest,
    ModelNames,
    PipelineChoice,
    PlanRequest,
    StepBudget,
    TaskResult,
    TaskSubmitted,
    VerifyRequest,
)
from agents.roles.verifier.spares import VERIFIER_SPARES, VerifierSpares
from agents.runtime.api import define_role
from agents.runtime.plugins import InstalledRole, RoleRegistry, load_roles
from agents.workspace import capture_snapshot
from bus.config import BusConfig
from bus.connection import open_bus
from codeloop.testing import make_repo
from codeloop.wiring.embedded import embedded_serve
from codeloop.wiring.process import RoleSetup, Workers
from codeloop.wiring.roles import DEFAULT_ROLES, role_deps
from codeloop.wiring.tools import InProcessTools

SCRIPT = """
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart

def decide(messages, info):
    if info.output_tools and not info.function_tools:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {
            "steps": [{"description": "fix add"}], "files_of_interest": ["calc/__init__.py"],
            "test_targets": ["tests/test_calc.py"]})])
    returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "calc/__init__.py"})])
    if returns[-1].tool_name == "read_file":
        text = returns[-1].content["content"].replace("a - b", "a + b")
        return ModelResponse(parts=[ToolCallPart("write_file", {"path": "calc/__init__.py", "content": text})])
    return ModelResponse(parts=[TextPart("fixed")])
"""
CALC = {
    "calc/__init__.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "tests/test_calc.py": "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n",
}
STAGES = ("plan", "retrieve", "code", "review", "verify")
REVIEWED = ["plan:planner", "retrieve:retriever", "code:coder", "review:noop-reviewer", "verify:verifier"]


async def _approve(request, ctx) -> dict:
    return {"verdict": "approve"}


NOOP_REVIEWER = define_role("noop-reviewer", "review", _approve, description="approves at once (benchmark)")


def with_noop_reviewer() -> RoleRegistry:
    """The installed roles plus the no-op reviewer, registered as an entry point would register it."""
    installed = load_roles()
    roles = {
        **installed.roles,
        "noop-reviewer": InstalledRole(NOOP_REVIEWER, "pipeline_bench:NOOP_REVIEWER", "bench"),
    }
    return RoleRegistry(roles, installed.broken)


def calc_repo(root: Path, extra_files: int) -> Path:
    """The calculator with `extra_files` more modules beside it (a bigger tree to snapshot)."""
    files = dict(CALC)
    for i in range(extra_files):
        files[f"pkg/mod{i // 50}/m{i}.py"] = (
            f'"""Module {i}."""\n\n\ndef f{i}(x):\n    return x * {i} + {i % 7}\n'
        )
    return make_repo(root, files)


async def through_pipeline(bus, task: TaskSubmitted) -> dict[str, float]:
    started = time.perf_counter()
    snapshot = await capture_snapshot(bus, Path(task.repo))
    times = {"snapshot": time.perf_counter() - started}
    task = task.model_copy(update={"snapshot": snapshot})
    transitions: list[tuple[str, datetime]] = []

    def on_event(envelope) -> None:
        if envelope.kind == "event" and envelope.payload["name"] == "transition":
            transitions.append((envelope.payload["data"].get("stage") or "end", envelope.sent_at))

    envelope, _ = await submit_task(bus, task)
    final = await watch_task(bus, envelope.task_id, on_event)
    result = TaskResult.model_validate(final.payload)
    assert result.status == "done", result.report
    for (stage, at), (_, nxt) in zip(transitions, transitions[1:], strict=False):
        if stage in STAGES:
            times[stage] = times.get(stage, 0.0) + (nxt - at).total_seconds()
    times["total"] = time.perf_counter() - started
    return times


async def by_direct_calls(deps, task: TaskSubmitted) -> dict[str, float]:
    from agents.roles.coder import code
    from agents.roles.planner import plan
    from agents.roles.retriever import retrieve
    from agents.roles.verifier.role import verify

    started = time.perf_counter()
    task = task.model_copy(update={"snapshot": await capture_snapshot(deps.bus, Path(task.repo))})
    times = {"snapshot": time.perf_counter() - started}
    budget = StepBudget(requests=30, tokens=100_000, deadline_at=datetime.now(UTC) + timedelta(minutes=10))

    async def timed(stage: str, call):
        t0 = time.perf_counter()
        out = await call
        times[stage] = time.perf_counter() - t0
        return out

    planned = await timed("plan", plan(deps, "direct", PlanRequest(step_id="1", task=task, budget=budget)))
    context = await timed(
        "retrieve", retrieve(deps, "direct", ContextRequest(step_id="2", task=task, plan=planned.plan))
    )
    coded = await timed(
        "code",
        code(
            deps,
            "direct",
            CodeRequest(step_id="3", task=task, plan=planned.plan, context=context, budget=budget),
        ),
    )
    verified = await timed(
        "verify",
        verify(
            deps,
            "direct",
            VerifyRequest(
                step_id="4", task=task, plan=planned.plan, patch=coded.patch, deadline_at=budget.deadline_at
            ),
        ),
    )
    assert verified.report.verdict == "passed", verified.report
    times["total"] = time.perf_counter() - started
    return times


async def measure(bus, deps, repos: dict[str, Path], script: Path, rounds: int, settled) -> dict:
    results: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {"pipeline": [], "direct": [], "review": []} for name in repos
    }
    for name, repo in repos.items():
        task = TaskSubmitted(
            text="add(2, 3) returns -1",
            repo=str(repo),
            mode="write",
            models=ModelNames(default=f"function:{script}:decide"),
        )
        reviewed = task.model_copy(update={"pipeline": PipelineChoice(name="reviewed", stages=REVIEWED)})
        # a first, untimed task of each kind builds the indexes and warms the model
        await through_pipeline(bus, task)
        await by_direct_calls(deps, task)
        await through_pipeline(bus, reviewed)
        for _ in range(rounds):
            await settled()
            results[name]["pipeline"].append(await through_pipeline(bus, task))
            await settled()
            results[name]["direct"].append(await by_direct_calls(deps, task))
            await settled()
            results[name]["review"].append(await through_pipeline(bus, reviewed))
    return results


async def main(rounds: int, big_files: int) -> None:
    with tempfile.TemporaryDirectory(prefix="codeloop-pipeline-bench-") as tmp:
        base = Path(tmp)
        script = base / "decide.py"
        script.write_text(SCRIPT)
        repos = {
            "small (2 files)": calc_repo(base / "small", 0),
            f"big ({big_files + 2} files)": calc_repo(base / "big", big_files),
        }
        config = BusConfig(state_dir=base / "state")
        (base / "spares").mkdir()
        # Both paths verify in a workspace prepared ahead, as `serve` does; the bench owns both
        # spare pools so that it can wait, untimed, until they are ready before each task (a
        # worker prepares its next spare while idle or while its model works).
        async with VerifierSpares(InProcessTools(), base / "spares") as pipeline_spares:
            workers = Workers(roles=(*DEFAULT_ROLES, "noop-reviewer"), registry=with_noop_reviewer())
            async with embedded_serve(
                config,
                join=False,
                store="state_dir",
                workers=workers,
                setup=RoleSetup(verifier_spares=pipeline_spares),
            ) as serve:
                async with open_bus(serve.config) as bus:
                    home = role_deps(bus, base / "direct-home")
                    async with VerifierSpares(home.tools, home.scratch_dir) as direct_spares:
                        deps = home.providing(VERIFIER_SPARES, direct_spares)

                        async def settled() -> None:
                            await pipeline_spares.wait_ready()
                            await direct_spares.wait_ready()

                        results = await measure(bus, deps, repos, script, rounds, settled)
    print(f"pipeline overhead per task, scripted zero-latency model, median of {rounds} rounds (s)")
    for name, runs in results.items():
        print(f"\n{name}")
        print(f"  {'stage':<10} {'pipeline':>9} {'direct':>9} {'bus share':>10} {'+review':>9}")
        for stage in ("snapshot", *STAGES, "total"):
            p = statistics.median(r.get(stage, 0.0) for r in runs["pipeline"])
            d = statistics.median(r.get(stage, 0.0) for r in runs["direct"])
            v = statistics.median(r.get(stage, 0.0) for r in runs["review"])
            print(f"  {stage:<10} {p:9.3f} {d:9.3f} {p - d:10.3f} {v:9.3f}")
        stage_cost = statistics.median(r.get("review", 0.0) for r in runs["review"])
        added = statistics.median(r["total"] for r in runs["review"]) - statistics.median(
            r["total"] for r in runs["pipeline"]
        )
        print(
            f"  no-op review stage: {1000 * stage_cost:.1f} ms from its dispatch to the next stage's "
            f"(target under 50 ms); task totals differ by {1000 * added:+.1f} ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big-files", type=int, default=1000)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.big_files)
