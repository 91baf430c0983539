"""The console's Starlette app: its routes, behind the gate (`codeloop.console.security`).

    GET  /                          the tasks (filters ?status= &principal=), live
    GET  /stream                    the list's event stream (SSE)
    GET  /submit    POST /tasks     the submission form, and submitting it
    GET  /tasks/ID                  a task's page: panel and live timeline (its newest events; ?all=1: all)
    GET  /tasks/ID/events?before=N  the timeline's rows before stream sequence N ("show earlier")
    GET  /tasks/ID/panel            the panel alone (refreshed by the page)
    GET  /tasks/ID/stream?after=N   the task's events after stream sequence N (SSE)
    GET  /tasks/ID/patch            the patch, as a file
    POST /tasks/ID/answer           approve or deny the pending confirmation
    POST /tasks/ID/cancel           cancel
    POST /tasks/ID/continue         continue an ended task as a new one linked to it
    GET  /reports  /reports/N  /reports/N/report.html
    GET  /static/NAME               stylesheet, scripts (htmx from its installed package)

Every action answers an htmx request with the fresh fragment and a browser's plain form post
with a redirect back to the page (303), so the console works without scripts too.
"""

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from agents.orchestrator.stages import known_statuses
from codeloop.console.access import AccessTable
from codeloop.console.assets import static_response
from codeloop.console.pages import panel_view, refusal_page, render, render_row
from codeloop.console.reports import find_runs, run_detail
from codeloop.console.security import Caller, ConsoleGate
from codeloop.console.streams import list_stream, task_stream
from codeloop.console.submit_form import SubmitForm
from codeloop.console.tasks import ConsoleTasks, Refused
from codeloop.console.timeline import PAGE_ROWS, Timelines


@dataclass(frozen=True)
class ConsoleConfig:
    """What the app serves: the tasks on the bus, the runs under `reports`, who may come in."""

    tasks: ConsoleTasks
    access: AccessTable
    reports: list[Path] = field(default_factory=list)
    form: SubmitForm | None = None


def build_app(config: ConsoleConfig) -> ConsoleGate:
    """The console as an ASGI app: the routes behind `ConsoleGate`."""
    views = _Views(config)
    routes = [
        Route("/", views.tasks_page),
        Route("/stream", views.tasks_stream),
        Route("/submit", views.submit_page),
        Route("/tasks", views.submit, methods=["POST"]),
        Route("/tasks/{task_id:str}", views.task),
        Route("/tasks/{task_id:str}/panel", views.panel),
        Route("/tasks/{task_id:str}/events", views.earlier_events),
        Route("/tasks/{task_id:str}/stream", views.task_events),
        Route("/tasks/{task_id:str}/patch", views.patch),
        Route("/tasks/{task_id:str}/answer", views.answer, methods=["POST"]),
        Route("/tasks/{task_id:str}/cancel", views.cancel, methods=["POST"]),
        Route("/tasks/{task_id:str}/continue", views.continue_task, methods=["POST"]),
        Route("/reports", views.reports),
        Route("/reports/{run_id:str}", views.report),
        Route("/reports/{run_id:str}/report.html", views.report_file),
        Route("/static/{name:str}", views.static),
        Route("/favicon.ico", _no_icon),
    ]
    return ConsoleGate(Starlette(routes=routes), config.access)


async def _no_icon(_: Request) -> Response:
    return Response(status_code=204)


def _caller(request: Request) -> Caller:
    return request.state.caller


def _not_found(what: str) -> HTMLResponse:
    return HTMLResponse(refusal_page(404, f"no {what} here"), status_code=404)


def _htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


class _Views:
    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        self.tasks = config.tasks
        self.form = config.form or SubmitForm(config.tasks)
        self.timelines = Timelines(config.tasks.bus, render_row)

    def page(self, request: Request, name: str, code: int = 200, **context: object) -> HTMLResponse:
        return HTMLResponse(render(name, caller=_caller(request), **context), status_code=code)

    async def tasks_page(self, request: Request) -> Response:
        grant = _caller(request).grant
        status = request.query_params.get("status") or None
        principal = (request.query_params.get("principal") or None) if grant.operator else None
        rows = await self.tasks.rows(grant, status=status, principal=principal)
        query = "&".join(f"{k}={v}" for k, v in (("status", status), ("principal", principal)) if v)
        return self.page(
            request,
            "tasks.html",
            nav="tasks",
            rows=rows,
            statuses=known_statuses(),  # the machine's and the installed stage kinds'
            status=status,
            principal=principal,
            principals=await self.tasks.principals() if grant.operator else [],
            stream_url="/stream" + (f"?{query}" if query else ""),
        )

    async def tasks_stream(self, request: Request) -> Response:
        grant = _caller(request).grant
        status = request.query_params.get("status") or None
        principal = (request.query_params.get("principal") or None) if grant.operator else None
        stream = list_stream(self.tasks, grant, status=status, principal=principal)
        return StreamingResponse(stream, media_type="text/event-stream")

    async def submit_page(self, request: Request) -> Response:
        return self.page(request, "submit.html", nav="submit", **self.form.context(_caller(request).grant))

    async def submit(self, request: Request) -> Response:
        grant = _caller(request).grant
        values = {k: str(v) for k, v in (await request.form()).items() if k != "csrf_token"}
        try:
            task_id = await self.form.submit(grant, values)
        except Refused as exc:
            context = self.form.context(grant, values)
            return self.page(
                request, "submit.html", exc.status, nav="submit", error=str(exc), field=exc.field, **context
            )
        except ValidationError as exc:
            error = exc.errors()[0]
            name = str(error["loc"][0]) if error["loc"] else None
            context = self.form.context(grant, values)
            message = f"{name}: {error['msg']}; nothing was submitted"
            return self.page(request, "submit.html", 400, nav="submit", error=message, field=name, **context)
        return _redirect(request, f"/tasks/{task_id}")

    async def task(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        page = await self.tasks.page(_caller(request).grant, task_id)
        if page is None:
            return _not_found(f"task {task_id}")
        limit = None if request.query_params.get("all") else PAGE_ROWS
        timeline = await self.timelines.page(task_id, limit=limit)
        return self.page(
            request,
            "task.html",
            task_id=task_id,
            p=panel_view(task_id, page),
            t=timeline,
            page_rows=PAGE_ROWS,
        )

    async def earlier_events(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        if not await self.tasks.visible(_caller(request).grant, task_id):
            return _not_found(f"task {task_id}")
        before = _count(request.query_params.get("before"))
        timeline = await self.timelines.page(task_id, before=before or None)
        return self.page(request, "timeline_rows.html", task_id=task_id, t=timeline, page_rows=PAGE_ROWS)

    async def panel(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        page = await self.tasks.page(_caller(request).grant, task_id)
        if page is None:
            return _not_found(f"task {task_id}")
        return self.page(request, "panel.html", p=panel_view(task_id, page))

    async def task_events(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        if not await self.tasks.visible(_caller(request).grant, task_id):
            return _not_found(f"task {task_id}")
        # A browser that reconnects names the last event it got; the page named the last it showed.
        after = max(_count(request.query_params.get("after")), _count(request.headers.get("last-event-id")))
        return StreamingResponse(
            task_stream(self.tasks, task_id, after=after), media_type="text/event-stream"
        )

    async def patch(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        page = await self.tasks.page(_caller(request).grant, task_id)
        if page is None or page.state is None or not page.state.patch:
            return _not_found(f"patch of task {task_id}")
        headers = {"content-disposition": f'attachment; filename="{task_id}.patch"'}
        return PlainTextResponse(page.state.patch, media_type="text/x-diff", headers=headers)

    async def answer(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        form = await request.form()
        approve = str(form.get("approve", "")) == "yes"
        try:
            seen = await self.tasks.answer(
                _caller(request).grant, task_id, str(form.get("request_id", "")), approve=approve
            )
        except Refused as exc:
            return await self._after_action(request, task_id, str(exc), exc.status)
        if not seen:
            return _not_found(f"task {task_id}")
        return await self._after_action(request, task_id)

    async def cancel(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        if not await self.tasks.cancel(_caller(request).grant, task_id):
            return _not_found(f"task {task_id}")
        return await self._after_action(request, task_id)

    async def continue_task(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        grant = _caller(request).grant
        text = str((await request.form()).get("text", ""))
        try:
            new_id = await self.tasks.continue_task(grant, task_id, text)
        except Refused as exc:
            if _htmx(request):  # said beside the button: htmx swaps no error response in
                return PlainTextResponse(str(exc), headers={"x-console-status": str(exc.status)})
            return HTMLResponse(refusal_page(exc.status, str(exc)), status_code=exc.status)
        if new_id is None:
            return _not_found(f"task {task_id}")
        return _redirect(request, f"/tasks/{new_id}")

    async def _after_action(
        self, request: Request, task_id: str, error: str | None = None, status: int = 200
    ) -> Response:
        if not _htmx(request):
            if error:
                return HTMLResponse(refusal_page(status, error), status_code=status)
            return RedirectResponse(f"/tasks/{task_id}", status_code=303)
        page = await self.tasks.page(_caller(request).grant, task_id)
        if page is None:
            return _not_found(f"task {task_id}")
        return self.page(request, "panel.html", p=panel_view(task_id, page))

    async def reports(self, request: Request) -> Response:
        runs = find_runs(self.config.reports)
        return self.page(
            request, "reports.html", nav="reports", runs=runs, roots=[str(r) for r in self.config.reports]
        )

    async def report(self, request: Request) -> Response:
        run = next(
            (r for r in find_runs(self.config.reports) if r.run_id == request.path_params["run_id"]), None
        )
        if run is None:
            return _not_found("such run")
        return self.page(request, "report.html", nav="reports", d=run_detail(run))

    async def report_file(self, request: Request) -> Response:
        run = next(
            (r for r in find_runs(self.config.reports) if r.run_id == request.path_params["run_id"]), None
        )
        detail = run_detail(run) if run is not None else None
        if detail is None or detail.html_report is None:
            return _not_found("such report")
        # A download, never a page of the console: the report carries its own inline styles.
        return FileResponse(
            detail.html_report,
            filename=f"{detail.run.path.name}-report.html",
            content_disposition_type="attachment",
        )

    async def static(self, request: Request) -> Response:
        return static_response(request.path_params["name"])


def _count(text: str | None) -> int:
    try:
        return max(0, int(text or 0))
    except ValueError:
        return 0


def _redirect(request: Request, location: str) -> Response:
    if _htmx(request):
        return Response(status_code=204, headers={"hx-redirect": location})
    return RedirectResponse(location, status_code=303)
