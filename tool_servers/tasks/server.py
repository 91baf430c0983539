"""The `tasks` MCP server: an MCP client submits a coding task, follows it, answers it, cancels it.

Seven tools behind the tool protocol's gate (scopes, validation, trace ids, audit), all of scope
`read`, because what a task may do is bounded by its mode and the mode by the grant:

    submit_task   read-mode tasks with `read`; write mode needs `write`, execute mode `execute`
    continue_task an ended task goes on as a new task linked to it (the same scopes as its mode)
    get_task      the task view (status, stage, step, tokens, pending confirmation, result)
    wait_task     blocks until the task ends or its timeout passes; progress notifications on
                  every event when the client sent a progress token
    cancel_task   the task ends `cancelled`
    list_tasks    the caller's own tasks
    answer_confirmation   approve or refuse a high-risk tool call inside the task

and, when the server is built with a verifier, `verify_patch` (scope `execute`: it runs the
repository's tests) to judge a patch from anywhere (`tool_servers.tasks.verify`),

and the resource `codeloop://tasks/{task_id}` (the view as JSON), announced to
`subscriptions/listen` streams (2026-07-28) and to `resources/subscribe` subscribers (2025-11-25)
on every change of the task (fed from the task's events). A client
that declares the MCP tasks extension gets `submit_task` as a protocol task (`mcp_tasks`).

Tenancy: every call runs as the caller's principal (its bearer token over HTTP, the server's
own principal over stdio); a task another principal submitted is "not found".

The server never writes under its root: a task works on a snapshot captured at submission,
and its patch comes back in the result for the client to apply. Where the tasks live is the
`TasksBackend`'s business (`tool_servers.tasks.backend`).
"""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from tool_servers.confinement import Root
from tool_servers.protocol.errors import Conflict, InvalidArguments, NotFound, PermissionDenied
from tool_servers.protocol.gate import caller
from tool_servers.protocol.scopes import Scope, format_scopes
from tool_servers.protocol.sdk import build_server, current_reply, current_request
from tool_servers.protocol.spec import CallContext, ServerOptions, ToolSpec, read_tool
from tool_servers.tasks.backend import (
    Submission,
    SubmissionRefused,
    TasksBackend,
    TaskStillRunning,
    TooManyTasks,
)
from tool_servers.tasks.mcp_tasks import TasksExtension
from tool_servers.tasks.verify import PatchVerifier, verify_patch_tool
from tool_servers.tasks.views import (
    AnswerConfirmationArgs,
    Answered,
    ContinueTaskArgs,
    ListTasksArgs,
    SubmitTaskArgs,
    Submitted,
    TaskIdArgs,
    TaskList,
    TaskView,
    UsageArgs,
    UsageReport,
    WaitTaskArgs,
    continue_task_args,
    submit_task_args,
)

RESOURCE_PREFIX = "codeloop://tasks/"
MODE_SCOPES = {"read": Scope.READ, "write": Scope.WRITE, "execute": Scope.EXECUTE}


def task_uri(task_id: str) -> str:
    return f"{RESOURCE_PREFIX}{task_id}"


class TaskTools:
    """The handlers, bound to one root and one backend."""

    def __init__(self, root: Root, backend: TasksBackend) -> None:
        self.root = root
        self.backend = backend

    async def submit(self, args: SubmitTaskArgs, call: CallContext) -> Submitted:
        needed = MODE_SCOPES[args.mode]
        if needed not in call.scopes:
            raise PermissionDenied(
                f"mode {args.mode!r} needs the '{needed.value}' scope; {call.principal} was granted "
                f"{format_scopes(call.scopes)}. Submit in a mode the grant allows (read: an answer "
                "only), or ask for a grant with that scope; nothing was submitted.",
                missing_scope=needed.value,
                granted=[s.value for s in sorted(call.scopes)],
            )
        if not args.task.strip():
            raise InvalidArguments("task is blank: say what to do; nothing was submitted", field="task")
        repo = self.root.resolve(args.repo)
        if not repo.is_dir():
            raise NotFound(
                f"repo {args.repo!r} is not a directory under the server's root; nothing was submitted",
                repo=args.repo,
            )
        submission = Submission(
            principal=call.principal, text=args.task, repo=repo, mode=args.mode, options=args.task_options()
        )
        try:
            task_id = await self.backend.submit(submission)
        except TooManyTasks as exc:
            raise Conflict(str(exc), **exc.details) from None
        except SubmissionRefused as exc:
            raise InvalidArguments(str(exc), **exc.details) from None
        return Submitted(task_id=task_id, status="submitted")

    async def continue_(self, args: ContinueTaskArgs, call: CallContext) -> Submitted:
        parent = _found(await self.backend.get(call.principal, args.task_id), args.task_id)
        needed = MODE_SCOPES[parent.mode or "read"]
        if needed not in call.scopes:
            raise PermissionDenied(
                f"task {args.task_id} runs in mode {parent.mode!r}, which needs the '{needed.value}' "
                f"scope; {call.principal} was granted {format_scopes(call.scopes)}; nothing was submitted.",
                missing_scope=needed.value,
                granted=[s.value for s in sorted(call.scopes)],
            )
        if args.text is not None and not args.text.strip():
            raise InvalidArguments("text is blank: leave it out or say what to do now", field="text")
        try:
            task_id = await self.backend.continue_task(
                call.principal, args.task_id, text=args.text, options=args.task_options()
            )
        except (TooManyTasks, TaskStillRunning) as exc:
            raise Conflict(str(exc), **exc.details) from None
        except SubmissionRefused as exc:
            raise InvalidArguments(str(exc), **exc.details) from None
        if task_id is None:
            raise _not_found(args.task_id)
        return Submitted(task_id=task_id, status="submitted", parent_task_id=args.task_id)

    async def get(self, args: TaskIdArgs, call: CallContext) -> TaskView:
        return _found(await self.backend.get(call.principal, args.task_id), args.task_id)

    async def wait(self, args: WaitTaskArgs, call: CallContext) -> TaskView:
        request = current_request()
        reply = current_reply()
        if reply is not None:  # the user was asked about the pending confirmation (`pending_question`)
            view = _found(await self.backend.get(call.principal, args.task_id), args.task_id)
            if view.pending_confirmation is not None:
                await self.backend.answer(
                    call.principal, args.task_id, view.pending_confirmation.request_id, approve=reply
                )
        sent = 0

        async def progress(view: TaskView, message: str) -> None:
            nonlocal sent
            sent += 1
            text = f"{view.status}" + (f" ({view.stage})" if view.stage else "")
            text += f", step {view.step}, {view.tokens} tokens: {message}"
            await request.report_progress(sent, None, text[:500])

        view = await self.backend.wait(
            call.principal, args.task_id, timeout_s=args.timeout_s, on_progress=progress, until_question=True
        )
        return _found(view, args.task_id)

    async def pending_question(self, args: WaitTaskArgs, call: CallContext) -> str | None:
        """What `wait_task` asks the user (elicitation) before it waits: the task's pending
        confirmation, if any."""
        view = await self.backend.get(call.principal, args.task_id)
        if view is None or view.pending_confirmation is None:
            return None
        pending = view.pending_confirmation
        return f"codeloop task {args.task_id} wants to: {pending.question}. Allow?"

    async def cancel(self, args: TaskIdArgs, call: CallContext) -> TaskView:
        return _found(await self.backend.cancel(call.principal, args.task_id), args.task_id)

    async def list(self, args: ListTasksArgs, call: CallContext) -> TaskList:
        return TaskList(tasks=await self.backend.list(call.principal, status=args.status, limit=args.limit))

    async def usage(self, args: UsageArgs, call: CallContext) -> UsageReport:
        return await self.backend.usage(call.principal, days=args.days)

    async def answer(self, args: AnswerConfirmationArgs, call: CallContext) -> Answered:
        recorded = await self.backend.answer(
            call.principal, args.task_id, args.request_id, approve=args.approve
        )
        if recorded is None:
            raise _not_found(args.task_id)
        if not recorded:
            raise Conflict(
                f"task {args.task_id} has no pending confirmation {args.request_id!r} (answered, timed "
                "out, or never asked); get_task shows the one pending now",
                request_id=args.request_id,
            )
        view = _found(await self.backend.get(call.principal, args.task_id), args.task_id)
        return Answered(task_id=args.task_id, request_id=args.request_id, approved=args.approve, task=view)


def _not_found(task_id: str) -> NotFound:
    return NotFound(
        f"no task {task_id!r} of yours; list_tasks shows the tasks you submitted", task_id=task_id
    )


def _found(view: TaskView | None, task_id: str) -> TaskView:
    if view is None:
        raise _not_found(task_id)
    return view


def task_tools(tools: TaskTools) -> list[ToolSpec]:
    return [
        ToolSpec(
            name="submit_task",
            description="Submit a coding task about a repository under the root; returns its id at once. "
            "The repository's working tree is captured now; the task works on that copy and never "
            "changes the checkout: a patch comes back in the result. Follow it with wait_task.",
            scope=Scope.READ,
            input_model=submit_task_args(tools.backend.task_options),
            output_model=Submitted,
            handler=tools.submit,
            read_only=False,
            idempotent=False,
        ),
        ToolSpec(
            name="continue_task",
            description="Continue one of your ended tasks (handed_off, failed, cancelled or done) as a "
            "new task linked to it: the same starting tree, its patch as the starting point, its plan, "
            "an account of what it tried and what the verifier said, and `text` as a new instruction; "
            "fresh budgets unless given. The new task's patch is the combined patch against the "
            "original tree. Returns the new task's id at once; follow it with wait_task.",
            scope=Scope.READ,
            input_model=continue_task_args(tools.backend.task_options),
            output_model=Submitted,
            handler=tools.continue_,
            read_only=False,
            idempotent=False,
        ),
        read_tool(
            "get_task",
            "The task's view: status, stage, step, tokens, elapsed time, a pending "
            "confirmation, and the result (the `codeloop run --json` object) once it ended.",
            TaskIdArgs,
            TaskView,
            tools.get,
        ),
        ToolSpec(
            name="wait_task",
            description="Wait until the task ends or timeout_s passes, then return its view (a timeout "
            "is not an error: call again). Sends progress notifications (stage, step, tokens, last "
            "event) when the request has a progress token. Returns early when a high-risk action "
            "starts waiting for an answer; a client that can elicit is asked on its next wait_task, "
            "any other answers with answer_confirmation.",
            scope=Scope.READ,
            input_model=WaitTaskArgs,
            output_model=TaskView,
            handler=tools.wait,
            uses_request=True,
            ask=tools.pending_question,
        ),
        ToolSpec(
            name="cancel_task",
            description="Stop the task: it ends `cancelled` (a step in flight finishes, its result is "
            "ignored). Returns the view.",
            scope=Scope.READ,
            input_model=TaskIdArgs,
            output_model=TaskView,
            handler=tools.cancel,
            read_only=False,
            destructive=True,
        ),
        read_tool(
            "list_tasks",
            "The tasks you submitted, newest first, optionally of one status.",
            ListTasksArgs,
            TaskList,
            tools.list,
        ),
        read_tool(
            "get_usage",
            "Your quota (from the configuration center) and what your tasks used per UTC day: "
            "tasks, running, tokens, cost, when the day's quota resets.",
            UsageArgs,
            UsageReport,
            tools.usage,
        ),
        ToolSpec(
            name="answer_confirmation",
            description="Approve or refuse the task's pending high-risk action (its view's "
            "pending_confirmation). Nothing is approved by default: no answer in time is a refusal.",
            scope=Scope.READ,
            input_model=AnswerConfirmationArgs,
            output_model=Answered,
            handler=tools.answer,
            read_only=False,
            idempotent=False,
        ),
    ]


def build_tasks_server(
    root: Path, options: ServerOptions, backend: TasksBackend, *, verifier: PatchVerifier | None = None
) -> MCPServer[object]:
    """The `tasks` MCP server over `backend`, confined to `root`; with `verifier`, also the
    `verify_patch` tool (`tool_servers.tasks.verify`)."""
    tools = TaskTools(Root(root), backend)
    specs = task_tools(tools) + ([verify_patch_tool(tools.root, verifier)] if verifier is not None else [])
    subscriptions = InMemorySubscriptionBus()

    legacy = LegacySubscribers()

    @asynccontextmanager
    async def announce_changes(_: MCPServer[object]) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_announce, backend, subscriptions, legacy)
            yield None
            tg.cancel_scope.cancel()

    server = build_server(
        "tasks",
        specs,
        options,
        instructions="Submit coding tasks about repositories under the root and follow them to their "
        "patch or answer: submit_task, then wait_task until the view has a result.",
        lifespan=announce_changes,
        subscriptions=subscriptions,
        extensions=[TasksExtension(backend, options)],
    )

    @server.resource(
        RESOURCE_PREFIX + "{task_id}",
        name="task",
        description="A task's view as JSON; listen to it for an update on every change.",
        mime_type="application/json",
    )
    async def task_resource(task_id: str) -> str:
        principal, _ = caller(options)
        view = await backend.get(principal, task_id)
        if view is None:
            raise ResourceError(f"no task {task_id!r} of yours")
        return json.dumps(view.model_dump(mode="json"))

    async def subscribe(
        ctx: ServerRequestContext[object, object], params: SubscribeRequestParams
    ) -> EmptyResult:
        task_id = str(params.uri).removeprefix(RESOURCE_PREFIX)
        principal, _ = caller(options)
        if not str(params.uri).startswith(RESOURCE_PREFIX) or await backend.get(principal, task_id) is None:
            raise MCPError(code=INVALID_PARAMS, message=f"no task resource {params.uri} of yours")
        legacy.add(str(params.uri), ctx.session)
        return EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[object, object], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        legacy.remove(str(params.uri), ctx.session)
        return EmptyResult()

    async def own_tasks_only(ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
        # A listen stream for another principal's task would tell when it changes: refuse it.
        if ctx.method == "subscriptions/listen":
            params = ctx.params if isinstance(ctx.params, dict) else {}
            uris = (params.get("notifications") or {}).get("resourceSubscriptions") or []
            principal, _ = caller(options)
            for uri in uris:
                theirs = str(uri).startswith(RESOURCE_PREFIX)
                if theirs and await backend.get(principal, str(uri).removeprefix(RESOURCE_PREFIX)) is None:
                    raise MCPError(code=INVALID_PARAMS, message=f"no task resource {uri} of yours")
        return await call_next(ctx)

    server.middleware.append(own_tasks_only)

    # 2025-11-25 sessions subscribe per URI (2026-07-28 ones listen instead, see `_announce`).
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    return server


class LegacySubscribers:
    """The sessions of 2025-11-25 clients subscribed to each task resource."""

    def __init__(self) -> None:
        self.by_uri: dict[str, list[ServerSession]] = {}

    def add(self, uri: str, session: ServerSession) -> None:
        sessions = self.by_uri.setdefault(uri, [])
        if session not in sessions:
            sessions.append(session)

    def remove(self, uri: str, session: ServerSession) -> None:
        sessions = self.by_uri.get(uri, [])
        if session in sessions:
            sessions.remove(session)

    async def notify(self, uri: str) -> None:
        for session in list(self.by_uri.get(uri, ())):
            try:
                await session.send_resource_updated(uri)
            except Exception:  # the client went away: forget its subscription
                self.remove(uri, session)


async def _announce(
    backend: TasksBackend, subscriptions: InMemorySubscriptionBus, legacy: LegacySubscribers
) -> None:
    # Every listen stream filters by URI, so a stream hears only the tasks it asked for.
    async with backend.changes() as changed:
        async for task_id in changed:
            await subscriptions.publish(ResourceUpdated(uri=task_uri(task_id)))
            await legacy.notify(task_uri(task_id))
