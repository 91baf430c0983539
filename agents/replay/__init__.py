"""Recording a task's LLM runs and replaying them (`docs/replay.md`).

model.py     what a recording holds: one JSON document per LLM run
store.py     where recordings live (the artifacts object store, `recording/<task_id>/`)
observer.py  the recorder every LLM role's run gets, which records it and replays it
session.py   what to resubmit for a replay, and what the replay found
compare.py   whether a replayed tool observation is the recorded one
exact.py     the exact replay: every recorded run again, no tool executed
errors.py    the errors of recording and replay, each with its failure class
"""
