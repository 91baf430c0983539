"""The agents: the orchestrator's task state machine, the roles that do a task's steps, and what
they share. Nothing here imports `codeloop` or `tool_servers`: tools are reached through MCP.

What lives where:

    api.py         the public API for plug-in authors (roles, kinds, the messages they handle);
                   `role_api.py` is its deprecated former path
    messages/      the wire contract of a task's path: the task and its result, each step's request
                   and result, the task record, the verifier's report (registered with the bus)
    errors.py      the errors agents raise, each with its failure class
    failures.py    the one failure taxonomy (`FailureClass`) and whose fault each class is
    client.py      the client side of a task: submit it, follow its events, cancel it
    orchestrator/  the task state machine over pipelines of stage kinds (`stages/`), its I/O shell,
                   the task records, the report a task ends with
    roles/         the built-in roles: planner, retriever, coder, verifier (a package), echo
    runtime/       what every role runs on: the role API and its plug-ins (`codeloop.roles`), the
                   built-in roles' definitions, the worker's dependencies, metering, tracing, the
                   tool servers' clients, human confirmations
    workspace/     snapshots of the user's tree, scratch workspaces, patches, and where a role's
                   workspace lives (here, or the workspace service, with its messages)
    models/        the model adapter (pydantic-ai): model names, retries, metering, fallbacks
    observe/       the events roles and tools publish beside their work
    replay/        recording a task's model responses and tool observations, and replaying them
    feedback.py    a verification report worded for the coder's revision

The modules stand in layers (the `agents-layers` import-linter contract; docs/architecture.md,
"Inside agents"), each importing only those below it:

    role_api  >  api | client | continuing | replay  >  runtime.builtin | runtime.plugins
      >  runtime.api  >  roles | orchestrator  >  instructions | runtime.metering
      >  observe | workspace  >  the role kernel (runtime.role, tools, environments, ...)
      >  models | budgets | quotas | feedback  >  messages  >  errors | failures | wording

Roles and stage kinds meet only in `messages`: no stage kind imports a role, no role the
orchestrator.
"""
