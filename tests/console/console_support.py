"""A `codeloop serve` in this process with its console, and a headless Chromium to drive it.

The serve is the real one (`codeloop.wiring.process.serve`: embedded nats-server, the roles the
test asks for, the console on a free port); the browser is Debian's `chromium` driven over the
DevTools protocol by Playwright, never a downloaded one. Screenshots go to the directory
`CODELOOP_CONSOLE_SCREENSHOTS` names (docs/images/console for the documentation), else to the
test's temporary directory.
"""

import os
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from bus.config import BusConfig
from bus.connection import Bus, open_bus
from codeloop.config.serve_note import client_config_for
from codeloop.console.hosting import ConsoleHosting
from codeloop.testing import make_repo
from codeloop.wiring.process import Hosting, Workers, serve
from tests.support.repos import CALC
from tool_servers.protocol.scopes import Scope

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

CHROMIUM = "/usr/bin/chromium"
PRINCIPALS = {"alice": "read,write", "bob": "read,write", "olga": "read,operator"}


@dataclass
class Console:
    url: str
    """`http://127.0.0.1:PORT` (no trailing slash)."""
    tokens: dict[str, str]
    """principal -> its token."""
    bus: Bus
    root: Path


@asynccontextmanager
async def console_serve(
    tmp_path: Path,
    *,
    roles: Sequence[str] = ("orchestrator",),
    reports: Sequence[Path] = (),
    repo: dict[str, str] = CALC,
) -> AsyncIterator[Console]:
    """A serve running `roles`, its console reading tokens for alice, bob and olga (an operator);
    the repository `calc` under its root holds `repo`."""
    root = tmp_path / "root"
    make_repo(root / "calc", repo)
    tokens = {name: secrets.token_urlsafe(24) for name in PRINCIPALS}
    token_file = tmp_path / "console-tokens"
    token_file.write_text("".join(f"{tokens[n]} {n} {s}\n" for n, s in PRINCIPALS.items()))
    token_file.chmod(0o600)
    console = ConsoleHosting(
        root=root,
        scopes=frozenset({Scope.READ, Scope.WRITE}),
        token_file=token_file,
        reports=tuple(reports),
    )
    config = BusConfig(state_dir=tmp_path / "state")
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        note = await tg.start(
            lambda task_status: serve(
                config,
                stop=stop,
                workers=Workers(roles=tuple(roles)),
                hosting=Hosting(metrics=None, console=console),
                task_status=task_status,
            )
        )
        assert note.console is not None
        async with open_bus(client_config_for(config, note)) as bus:
            yield Console(url=note.console.url.rstrip("/"), tokens=tokens, bus=bus, root=root)
        stop.set()


@asynccontextmanager
async def chromium() -> AsyncIterator["BrowserContext"]:
    """A headless Chromium (the system's) with a fresh context; skips when it is not installed."""
    if not has_chromium():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = await browser.new_context(
                viewport={"width": 1280, "height": 900}, accept_downloads=True
            )
            yield context
        finally:
            await browser.close()


def screenshots(tmp_path: Path) -> Path:
    where = Path(os.environ.get("CODELOOP_CONSOLE_SCREENSHOTS") or tmp_path / "screenshots")
    where.mkdir(parents=True, exist_ok=True)
    return where


async def shoot(page: "Page", where: Path, name: str) -> None:
    await page.screenshot(path=str(where / f"{name}.png"), full_page=True)


def has_chromium() -> bool:
    return Path(CHROMIUM).exists()
