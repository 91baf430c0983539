"""A task with a long timeline: its page shows the newest events, the earlier ones come on demand,
and the live stream goes on appending. A real serve (only its orchestrator: the task waits for a
planner, its page stays live), real HTTP, and Debian's Chromium."""

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx2
import pytest

from agents.observe.events import StepInfo, publish_event
from codeloop.console.events import read_events
from codeloop.console.timeline import PAGE_ROWS
from tests.console.console_support import Console, chromium, console_serve, screenshots

if TYPE_CHECKING:
    from playwright.async_api import Page

pytestmark = pytest.mark.anyio
NOTES = 2 * PAGE_ROWS + 50
"""Enough for two clicks of "Show earlier"."""


@pytest.fixture
async def console(tmp_path: Path) -> AsyncIterator[Console]:
    async with console_serve(tmp_path) as running:
        yield running


async def long_task(console: Console) -> str:
    """Alice's task, waiting for a planner, with NOTES note events after its own."""
    async with httpx2.AsyncClient(base_url=console.url) as http:
        reply = await http.post(
            "/tasks",
            data={"task": "what does add do?", "repo": "calc", "mode": "read"},
            headers={"authorization": f"Bearer {console.tokens['alice']}"},
        )
    assert reply.status_code == 303, reply.text
    task_id = reply.headers["location"].rsplit("/", 1)[1]
    step = StepInfo(task_id=task_id, role="planner", step_id="01-notes", trace_id="notes")
    for i in range(NOTES):
        await publish_event(console.bus, "note", f"note {i}", {}, step=step)
    return task_id


async def shown_seqs(page: "Page") -> list[int]:
    return await page.locator("#timeline li.event").evaluate_all("rows => rows.map(r => +r.dataset.seq)")


@pytest.mark.slow
async def test_the_newest_events_show_the_earlier_come_on_demand_and_new_ones_still_arrive(
    console: Console, tmp_path: Path
) -> None:
    """docs/console.md (A task's page): the page shows the newest events; "Show earlier" puts the
    ones before them above, in order, none twice; an event published after that still appears at
    the end without a reload."""
    task_id = await long_task(console)
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(f"{console.url}/?token={console.tokens['alice']}")
        await page.goto(f"{console.url}/tasks/{task_id}")
        await page.wait_for_selector("#live-state:text-is('live')")
        await page.evaluate("document.body.dataset.loadMark = 'first'")
        shown = await shown_seqs(page)
        # The orchestrator may publish while the page loads: compare with what was stored up to it.
        stored = [s.seq for s in await read_events(console.bus, task_id) if s.seq <= shown[-1]]
        assert len(stored) > PAGE_ROWS and shown == stored[-PAGE_ROWS:]
        earlier = len(stored) - PAGE_ROWS
        assert f"Show {min(earlier, PAGE_ROWS)} earlier events" in await page.inner_text("#timeline-earlier")
        # The page is long: its viewport from the timeline's heading on, where the control is.
        await page.evaluate("document.querySelector('section.timeline').scrollIntoView()")
        await page.screenshot(path=str(screenshots(tmp_path) / "task-long-timeline.png"))

        clicks = 0
        while await page.locator("#show-earlier").count():
            before = len(await shown_seqs(page))
            await page.click("#show-earlier")
            await page.wait_for_function(
                "n => document.querySelectorAll('#timeline li.event').length > n", arg=before
            )
            clicks += 1
        assert clicks == 2 and (await shown_seqs(page))[: len(stored)] == stored

        step = StepInfo(task_id=task_id, role="planner", step_id="02-notes", trace_id="notes")
        await publish_event(console.bus, "note", "one more note", {}, step=step)
        last = page.locator("#timeline li.event").last
        await last.locator(".what", has_text="one more note").wait_for()
        seqs = await shown_seqs(page)
        assert seqs[: len(stored)] == stored and seqs == sorted(set(seqs))
        assert await page.evaluate("document.body.dataset.loadMark") == "first"


async def test_without_scripts_the_whole_timeline_is_one_link_away_and_hidden_from_others(
    console: Console,
) -> None:
    """The "show earlier" control is a plain link to the page with every event; its rows, like
    the page, are a 404 for another principal."""
    task_id = await long_task(console)
    stored = await read_events(console.bus, task_id)
    alice = {"authorization": f"Bearer {console.tokens['alice']}"}
    bob = {"authorization": f"Bearer {console.tokens['bob']}"}
    async with httpx2.AsyncClient(base_url=console.url) as http:
        page = (await http.get(f"/tasks/{task_id}", headers=alice)).text
        assert page.count('class="event ') == PAGE_ROWS
        assert f'href="/tasks/{task_id}?all=1#timeline"' in page
        whole = (await http.get(f"/tasks/{task_id}?all=1", headers=alice)).text
        assert all(f'data-seq="{s.seq}"' in whole for s in stored) and 'id="show-earlier"' not in whole
        first_shown = stored[-PAGE_ROWS].seq
        earlier = (await http.get(f"/tasks/{task_id}/events?before={first_shown}", headers=alice)).text
        # The hundred before the first shown, and a control for those before them.
        page_before = [s.seq for s in stored[-2 * PAGE_ROWS : -PAGE_ROWS]]
        assert [int(n) for n in re.findall(r'data-seq="(\d+)"', earlier)] == page_before
        assert f'data-rows="/tasks/{task_id}/events?before={page_before[0]}"' in earlier
        for path in (f"/tasks/{task_id}?all=1", f"/tasks/{task_id}/events?before={first_shown}"):
            assert (await http.get(path, headers=bob)).status_code == 404
