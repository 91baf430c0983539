"""Observability of a task's path: the events roles and tools publish beside their work.

`events` publishes small, capped events on `codeloop.events.<task_id>.<kind>` with the task's
trace id, step and role; `tool_events` turns every tool call (the coder's through pydantic-ai
hooks, the other roles' through their MCP servers) into a `tool_call` event.
"""
