"""How a person sees events: one line each for `codeloop watch`, a tree for `codeloop trace`."""

import json
from datetime import datetime
from typing import Any

from rich.markup import escape
from rich.tree import Tree

from bus.envelope import Envelope
from codeloop.observe.timeline import ChainEntry, StepEntry, Timeline

ROLE_WIDTH = 12


def event_line(envelope: Envelope) -> str:
    """`HH:MM:SS.mmm  role  what happened`, one line, for any envelope of a task's stream."""
    stamp = envelope.sent_at.strftime("%H:%M:%S.%f")[:-3]
    payload = envelope.payload
    if envelope.kind == "task_result":
        tail = f" ({payload['failure_class']})" if payload.get("failure_class") else ""
        what = f"result: {payload.get('status')}{tail}  {_one_line(payload.get('answer') or '', 120)}"
        return f"{stamp}  {'orchestrator':<{ROLE_WIDTH}}  {what}".rstrip()
    if envelope.kind == "dead_letter":
        what = f"dead letter ({payload.get('reason')}): {_one_line(str(payload.get('error', '')), 200)}"
        return f"{stamp}  {'bus':<{ROLE_WIDTH}}  {what}"
    if envelope.kind != "event":
        return f"{stamp}  {'?':<{ROLE_WIDTH}}  {envelope.kind}"
    name, data = str(payload.get("name", "")), payload.get("data") or {}
    role = str(data.get("role") or data.get("principal") or _default_role(name))
    return f"{stamp}  {role:<{ROLE_WIDTH}}  {_what(name, str(payload.get('message', '')), data)}"


def _default_role(name: str) -> str:
    return (
        "orchestrator"
        if name in ("transition", "plan", "retrieval", "code", "verification", "hand_off")
        else "-"
    )


def _what(name: str, message: str, data: dict[str, Any]) -> str:
    if name == "tool_call":
        args = _one_line(json.dumps(data.get("arguments") or {}, sort_keys=True), 100)
        error = f" [{data['error_type']}]" if data.get("error_type") else ""
        return (
            f"tool {data.get('server')}.{data.get('tool')} {data.get('outcome')}{error} "
            f"{float(data.get('duration_ms') or 0):.0f} ms {args}"
        )
    if name == "model_call":
        cost = f" ${data['cost_usd']:.4f}" if data.get("cost_usd") is not None else ""
        return (
            f"model {data.get('model')} {data.get('outcome')} {data.get('input_tokens', 0)}+"
            f"{data.get('output_tokens', 0)} tokens {float(data.get('latency_s') or 0):.2f} s{cost}"
        )
    if name == "transition":
        step = f" [{data['step_id']}]" if data.get("step_id") else ""
        failure = f" ({data['failure_class']})" if data.get("failure_class") else ""
        said = f"  {_one_line(message, 120)}" if message else ""
        return f"→ {data.get('status')}{step}{failure}{said}"
    if name == "retrieval":
        files = ", ".join(f"{f.get('path')} {f.get('score')}" for f in (data.get("files") or [])[:5])
        return f"retrieval: {_one_line(message, 80)}; {files}"
    return f"{name}: {_one_line(message, 200)}"


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _configuration_branch(branch: Tree, configuration: dict[str, Any]) -> None:
    revision = configuration.get("config_revision")
    branch.add(f"config center: revision {revision}" if revision is not None else "config center: none")
    models = configuration.get("models") or {}
    roles = {
        "default": models.get("default"),
        "planner": models.get("planner"),
        "coder": models.get("coder"),
        **(models.get("roles") or {}),
    }
    for role, name in roles.items():
        if name:
            fallbacks = (models.get("fallbacks") or {}).get(role) or []
            branch.add(escape(f"{role}: {' -> '.join([name, *fallbacks])}"))
    for name, options in (models.get("options") or {}).items():
        set_ = ", ".join(f"{k}={v}" for k, v in options.items() if v is not None)
        branch.add(escape(f"{name}: {set_}"))
    budgets = configuration.get("budgets") or {}
    branch.add(", ".join(f"{k}={v}" for k, v in budgets.items() if v is not None))


def _chain_lines(root: Tree, chain: ChainEntry) -> None:
    if chain.parent_task_id is not None:
        root.add(escape(f"continues task {chain.parent_task_id} (which ended {chain.parent_ended})"))
        if len(chain.ancestors) > 1:
            root.add(escape("chain: " + " -> ".join(chain.ancestors) + " -> this task"))
        if chain.instruction:
            root.add(escape(f"instruction: {_one_line(chain.instruction, 160)}"))
    if chain.continued_by:
        root.add(escape("continued by: " + ", ".join(chain.continued_by)))


def timeline_tree(timeline: Timeline) -> Tree:
    """The timeline as a rich tree: the task, each step (role) with its calls, the plan's revisions."""
    duration = f", {timeline.duration_s:.2f} s" if timeline.duration_s is not None else ""
    failure = f" ({timeline.failure_class})" if timeline.failure_class else ""
    root = Tree(
        f"[bold]task {timeline.task_id}[/] {timeline.status or '?'}{failure}{duration}  trace {timeline.trace_id}"
    )
    if timeline.chain is not None:
        _chain_lines(root, timeline.chain)
    for step in timeline.steps:
        _step_branch(root.add(_step_label(step)), step)
    if timeline.plans:
        plans = root.add("plans")
        for i, plan in enumerate(timeline.plans):
            reason = f" — revised: {plan.reason}" if plan.reason else ""
            plans.add(
                f"{'first plan' if i == 0 else f'revision {i}'} at {plan.step_id}: {plan.steps} steps{reason}"
            )
    for note in timeline.outside_steps:
        root.add(escape(f"{note.name}: {_one_line(note.message, 160)}"))
    if timeline.configuration:
        _configuration_branch(root.add("configuration"), timeline.configuration)
    totals = root.add("by role")
    for role, s in timeline.roles.items():
        cost = f", ${s.cost_usd:.4f}" if s.cost_usd is not None else ""
        totals.add(
            f"{role}: {s.steps} steps, {s.duration_s:.2f} s, {s.model_calls} model calls "
            f"({s.input_tokens}+{s.output_tokens} tokens{cost}), {s.tool_calls} tool calls"
        )
    return root


def _step_label(step: StepEntry) -> str:
    took = f"{step.duration_s:.2f} s" if step.duration_s is not None else "running"
    return f"[bold]{step.role}[/] {step.step_id} ({step.status}) {took}"


def _step_branch(branch: Tree, step: StepEntry) -> None:
    items: list[tuple[datetime, str]] = []
    for call in step.model_calls:
        cost = f" ${call.cost_usd:.4f}" if call.cost_usd is not None else ""
        items.append(
            (
                call.at,
                f"model {call.model} {call.outcome} {call.input_tokens}+{call.output_tokens} "
                f"tokens {call.latency_s:.2f} s{cost}",
            )
        )
    for tool in step.tool_calls:
        error = f" [{tool.error_type}]" if tool.error_type else ""
        items.append(
            (tool.at, f"tool {tool.server}.{tool.tool} {tool.outcome}{error} {tool.duration_ms:.0f} ms")
        )
    for note in step.notes:
        items.append((note.at, f"{note.name}: {_one_line(note.message, 160)}"))
    for _, text in sorted(items, key=lambda item: item[0]):
        branch.add(escape(text))
