"""Who may use the console: the token, the principal rules of the tasks server, CSRF and the
page policy. A real serve (only its orchestrator: tasks stay unfinished), real HTTP, and for the
browser's part Debian's Chromium."""

import re
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.abc import TaskStatus
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from agents.orchestrator.records import TaskRecords
from tests.console.console_support import Console, chromium, console_serve, screenshots, shoot
from tool_servers.protocol.http import serve_asgi

pytestmark = pytest.mark.anyio


@pytest.fixture
async def console(tmp_path: Path) -> object:
    async with console_serve(tmp_path) as running:
        yield running


def bearer(console: Console, who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {console.tokens[who]}"}


async def submit(console: Console, who: str, text: str = "what does add do?") -> str:
    async with httpx2.AsyncClient(base_url=console.url) as http:
        reply = await http.post(
            "/tasks", data={"task": text, "repo": "calc", "mode": "read"}, headers=bearer(console, who)
        )
    assert reply.status_code == 303, reply.text
    return reply.headers["location"].rsplit("/", 1)[1]


async def test_a_request_without_a_valid_token_gets_401(console: Console) -> None:
    """Our contract (Console): a request without the token gets 401; the static files are no exception."""
    async with httpx2.AsyncClient(base_url=console.url) as http:
        for path in ("/", "/submit", "/static/console.js", "/reports", "/tasks/x"):
            assert (await http.get(path)).status_code == 401
        wrong = await http.get("/", headers={"authorization": "Bearer not-a-token-of-anyone"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
        assert (await http.get("/?token=not-a-token-of-anyone")).status_code == 401
        page = await http.get("/", headers={"accept": "text/html"})
        assert page.status_code == 401 and "codeloop console" in page.text
        assert (await http.get("/", headers=bearer(console, "alice"))).status_code == 200


async def test_another_principals_task_is_a_404_and_an_operator_sees_it(console: Console) -> None:
    """The tasks server's rule: a principal sees and touches only its own tasks, unless it is an operator."""
    task_id = await submit(console, "alice")
    async with httpx2.AsyncClient(base_url=console.url) as http:
        assert (await http.get(f"/tasks/{task_id}", headers=bearer(console, "alice"))).status_code == 200
        for path in (f"/tasks/{task_id}", f"/tasks/{task_id}/panel", f"/tasks/{task_id}/stream"):
            assert (await http.get(path, headers=bearer(console, "bob"))).status_code == 404
        cancel = await http.post(f"/tasks/{task_id}/cancel", headers=bearer(console, "bob"))
        assert cancel.status_code == 404
        assert task_id not in (await http.get("/", headers=bearer(console, "bob"))).text
        listed = (await http.get("/?principal=alice", headers=bearer(console, "olga"))).text
        assert f'id="task-{task_id}"' in listed and "<td>alice</td>" in listed
        assert (await http.get(f"/tasks/{task_id}", headers=bearer(console, "olga"))).status_code == 200
    state = await (await TaskRecords.open(console.bus)).get(task_id)
    assert state is not None and state.status != "cancelled"


async def test_the_submission_check_refuses_with_the_field_to_blame(console: Console) -> None:
    """Our choice: the form gives the same checks and errors as `codeloop submit`, nothing submitted."""
    async with httpx2.AsyncClient(base_url=console.url) as http:
        beyond = await http.post(
            "/tasks",
            data={"task": "fix it", "repo": "calc", "mode": "write"},
            headers=bearer(console, "olga"),
        )
        assert beyond.status_code == 403 and "needs the &#39;write&#39; scope" in beyond.text
        unknown = await http.post(
            "/tasks",
            data={"task": "x", "repo": "calc", "mode": "read", "model": "nosuchprovider:model"},
            headers=bearer(console, "alice"),
        )
        assert unknown.status_code == 400 and 'id="task-model" list="models"' in unknown.text
        assert re.search(r'id="task-model"[^>]*aria-invalid="true"', unknown.text)
        outside = await http.post(
            "/tasks", data={"task": "x", "repo": "../..", "mode": "read"}, headers=bearer(console, "alice")
        )
        assert outside.status_code == 400 and "repository" in outside.text
        assert 'class="task-row"' not in (await http.get("/", headers=bearer(console, "alice"))).text


async def _other_site(
    target: str, task_id: str, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED
) -> None:
    """A page of another origin whose button posts to the console's cancel action."""

    async def page(_: object) -> HTMLResponse:
        return HTMLResponse(
            f'<form method="post" action="{target}/tasks/{task_id}/cancel">'
            '<button id="go">win a prize</button></form>'
        )

    await serve_asgi(
        Starlette(routes=[Route("/", page)]),
        host="127.0.0.1",
        port=0,
        on_started=lambda port: task_status.started(f"http://127.0.0.1:{port}/"),
        lifespan="off",
    )


@pytest.mark.slow
async def test_a_cross_site_post_is_refused_and_a_page_carries_the_csrf_token(
    console: Console, tmp_path: Path
) -> None:
    """Our choice (docs/console.md): CSRF protection on every action; a cross-site POST is refused."""
    task_id = await submit(console, "alice")
    async with chromium() as browser, anyio.create_task_group() as tg:
        page = await browser.new_page()
        violations: list[str] = []
        page.on(
            "console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None
        )
        response = await page.goto(f"{console.url}/tasks/{task_id}?token={console.tokens['alice']}")
        assert response is not None and response.ok
        assert page.url == f"{console.url}/tasks/{task_id}"  # the token left the address
        csp = await response.header_value("content-security-policy")
        assert csp is not None and "unsafe-inline" not in csp and "script-src 'self'" in csp
        cookie = next(c for c in await browser.cookies() if c.get("name") == "codeloop_console")
        assert cookie.get("httpOnly") and cookie.get("sameSite") == "Strict"
        session = cookie.get("value") or ""
        assert session
        assert console.tokens["alice"] not in await page.content()
        await shoot(page, screenshots(tmp_path), "task-waiting")

        evil = await tg.start(_other_site, console.url, task_id)
        other = await browser.new_page()
        await other.goto(evil)
        async with other.expect_response(lambda r: r.url.endswith("/cancel")) as posted:
            await other.click("#go")
        assert (await posted.value).status == 403  # another origin: refused, whatever cookie it carried
        tg.cancel_scope.cancel()
    async with httpx2.AsyncClient(base_url=console.url, cookies={"codeloop_console": session}) as http:
        bare = await http.post(f"/tasks/{task_id}/cancel")
        assert bare.status_code == 403 and "CSRF" in bare.text
    state = await (await TaskRecords.open(console.bus)).get(task_id)
    assert state is not None and state.status != "cancelled"
    assert violations == []


async def test_reports_list_the_runs_under_the_given_directories(tmp_path: Path) -> None:
    """Our choice (docs/console.md): the eval and SWE-bench runs the serve was given, browsable."""
    runs = tmp_path / "runs"
    evaluation = runs / "eval-1"
    evaluation.mkdir(parents=True)
    (evaluation / "summary.json").write_text('{"tasks": 2, "resolved_rate": 0.5}')
    rows = ['{"task_id": "t-one", "resolved": true}', '{"task_id": "t-two", "resolved": false}']
    (evaluation / "results.jsonl").write_text("\n".join(rows) + "\n")
    (evaluation / "report.html").write_text("<html><style>p{}</style></html>")
    swebench = runs / "swe-1"
    swebench.mkdir()
    (swebench / "report.json").write_text(
        '{"total_instances": 3, "resolved_instances": 1, "resolved_ids": ["a__b-1"], '
        '"unresolved_ids": ["a__b-2"], "error_ids": ["a__b-3"]}'
    )
    async with console_serve(tmp_path, reports=[runs]) as console:
        async with httpx2.AsyncClient(base_url=console.url, headers=bearer(console, "alice")) as http:
            listing = (await http.get("/reports")).text
            assert "1 of 2 tasks resolved" in listing and "1 of 3 instances resolved" in listing
            ids = re.findall(r'href="/reports/(\d+)" class="mono">([^<]+)<', listing)
            by_name = {name: run_id for run_id, name in ids}
            page = (await http.get(f"/reports/{by_name['eval-1']}")).text
            assert "t-one" in page and "t-two" in page and "resolved_rate" in page
            download = await http.get(f"/reports/{by_name['eval-1']}/report.html")
            assert download.headers["content-disposition"].startswith("attachment")
            swe = (await http.get(f"/reports/{by_name['swe-1']}")).text
            assert all(i in swe for i in ("a__b-1", "a__b-2", "a__b-3"))
            assert (await http.get("/reports/99")).status_code == 404


async def test_a_running_task_cannot_be_continued_and_another_principals_not_at_all(console: Console) -> None:
    """Our contract (Continuing): a running task is refused; another principal's task is a 404."""
    task_id = await submit(console, "alice")
    async with httpx2.AsyncClient(base_url=console.url) as http:
        running = await http.post(
            f"/tasks/{task_id}/continue", data={"text": "and add a test"}, headers=bearer(console, "alice")
        )
        assert running.status_code == 409 and task_id in running.text
        theirs = await http.post(
            f"/tasks/{task_id}/continue", data={"text": "mine now"}, headers=bearer(console, "bob")
        )
        assert theirs.status_code == 404


@pytest.mark.slow
async def test_codeloop_console_prints_the_running_consoles_address(console: Console, tmp_path: Path) -> None:
    """Our contract: `codeloop console` prints the address of the local serve's console."""
    import json
    import subprocess
    import sys

    printed = await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            [sys.executable, "-m", "codeloop", "console", "--json", "--state-dir", str(tmp_path / "state")],
            capture_output=True,
            text=True,
            check=True,
        )
    )
    shown = json.loads(printed.stdout)
    assert shown["url"] == console.url + "/" and shown["generated"] is False and shown["token"] is None
    assert shown["token_file"] == str(tmp_path / "console-tokens")
    missing = await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            [sys.executable, "-m", "codeloop", "console", "--state-dir", str(tmp_path / "elsewhere")],
            capture_output=True,
            text=True,
        )
    )
    assert missing.returncode == 1 and "no running `codeloop serve`" in missing.stderr
