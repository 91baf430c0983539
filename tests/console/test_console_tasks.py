"""Following tasks in a browser: submit from the form, watch the task progress without a reload,
answer its confirmation, open its diff, download its patch; cancel another. Every role of a real
serve runs in this process; only the model's decisions are scripted (`tests/e2e/scripted.py`)."""

from pathlib import Path

import anyio
import pytest

from tests.console.console_support import Console, chromium, console_serve, screenshots, shoot
from tests.e2e.conftest import model

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
TASK_S = 180_000
"""Milliseconds a scripted task may take to reach the next state on a loaded machine."""


# No tests to run: the verifier has nothing to fail on, so an approved write ends the task `done`
# (with the CALC repository's failing tests it would be sent back for revision, asking again).
UNTESTED = {"calc.py": "def add(a, b):\n    return a + b\n"}


async def ended_with(page, *statuses: str) -> str:
    """The task page's status once it is one of `statuses`; on timeout, fails with the timeline."""
    shown = ", ".join(f"#task-panel[data-status='{s}']" for s in statuses)
    try:
        await page.wait_for_selector(shown, timeout=TASK_S)
    except Exception:
        timeline = await page.inner_text("#timeline")
        status = await page.inner_text("#task-status")
        raise AssertionError(f"still {status}; timeline:\n{timeline[-3000:]}") from None
    return await page.inner_text("#task-status")


async def submit_from_form(page, console: Console, text: str, *, where: Path | None = None) -> str:
    await page.goto(f"{console.url}/submit")
    await page.fill("#task-text", text)
    await page.select_option("#task-repo", "calc")
    await page.select_option("#task-mode", "write")
    await page.fill("#task-model", model("protected_write"))
    await page.fill("#task-max_steps", "12")
    if where is not None:
        await shoot(page, where, "submit")
    await page.click("#submit-button")
    await page.wait_for_load_state()
    error = page.locator("#submit-error")
    assert not await error.count(), await error.inner_text()
    await page.wait_for_url(f"{console.url}/tasks/*")
    return page.url.rsplit("/", 1)[1]


async def test_a_task_from_the_form_is_followed_live_approved_and_ends_done(tmp_path: Path) -> None:
    """The issue's acceptance: submit from the form, watch it progress on its page without a
    reload, approve its pending confirmation, see it end `done`, open the diff; cancel another."""
    where = screenshots(tmp_path)
    roles = ("orchestrator", "planner", "retriever", "coder", "verifier")
    async with console_serve(tmp_path, roles=roles, repo=UNTESTED) as console:
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(f"{console.url}/?token={console.tokens['alice']}")
            task_id = await submit_from_form(page, console, "add a CI workflow", where=where)
            # A mark only this page load carries: a reload would drop it.
            await page.evaluate("document.body.dataset.loadMark = 'first'")
            rows_at_load = await page.locator("#timeline li").count()

            await page.wait_for_selector("#confirmation", timeout=TASK_S)
            question = await page.inner_text("#confirmation-question")
            assert ".github/workflows/ci.yml" in question
            assert await page.locator("#timeline li").count() > rows_at_load
            await shoot(page, where, "task-confirmation")
            await page.click("#approve")

            assert await ended_with(page, "done", "handed_off", "failed", "cancelled") == "done"
            assert await page.evaluate("document.body.dataset.loadMark") == "first"
            assert await page.inner_text("#live-state") == "ended"
            kinds = await page.locator("#timeline li").evaluate_all("rows => rows.map(r => r.className)")
            assert any("kind-confirmation_answered" in k for k in kinds) and "event kind-result" in kinds[-1]

            diff = page.locator("details.file-diff", has_text=".github/workflows/ci.yml")
            if not await diff.evaluate("details => details.open"):  # a long diff starts closed
                await diff.locator("summary").click()
            assert "on: push" in await diff.locator(".hl").inner_text()
            await shoot(page, where, "task-done")
            async with page.expect_download() as download:
                await page.click("#download-patch")
            patch = await anyio.Path(await (await download.value).path()).read_text()
            assert "+++ b/.github/workflows/ci.yml" in patch

            # Another task: cancelled while it waits for its answer.
            other = await submit_from_form(page, console, "add a CI workflow, again")
            await page.wait_for_selector("#confirmation", timeout=TASK_S)
            await page.click("#cancel")
            assert await ended_with(page, "cancelled", "done", "handed_off", "failed") == "cancelled"

            await page.goto(f"{console.url}/")
            assert await page.inner_text(f"#task-{task_id} .badge") == "done"
            assert await page.inner_text(f"#task-{other} .badge") == "cancelled"
            await shoot(page, where, "tasks")
