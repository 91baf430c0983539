"""The orchestrator: a pure, table-driven state machine over pipelines that are data, behind a
thin I/O shell that writes the record before acting.

    machine.py     the transition function: transitions, budgets, the end
    io.py          its inputs (start, a step done or failed, cancel) and commands (dispatch, emit, finish)
    stages/        the stage kinds (plan, retrieve, code, review, verify, select, echo, plug-ins):
                   what a stage sends, the status it shows, how its result moves the task on; the
                   registry of installed kinds and the statuses they declare
    pipeline.py    pipelines: stages of a kind and a role, the standard ones, parsing and checking
    report.py      the result object and the report's prose (summary, diagnosis, hand-off)
    shell.py       the actor: reads the record, transitions, compare-and-sets, publishes the outbox
    records.py     the task records in the KV bucket
    rejections.py  dead-lettered submissions and results end their tasks visibly
    waiting.py     a task whose role has no live worker says what it waits for
"""

from agents.orchestrator.pipeline import DIAGNOSE, ECHO, EXPLAIN, FIX, NAMED, Pipeline, Stage, pipeline_for
from agents.orchestrator.shell import Orchestrator, orchestrator_spec

__all__ = [
    "DIAGNOSE",
    "ECHO",
    "EXPLAIN",
    "FIX",
    "NAMED",
    "Orchestrator",
    "Pipeline",
    "Stage",
    "orchestrator_spec",
    "pipeline_for",
]
