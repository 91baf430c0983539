"""The orchestrator: a pure, table-driven state machine (`machine.py`) over pipelines that are
data (`pipeline.py`), behind a thin I/O shell (`shell.py`) that writes the record before acting."""

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
