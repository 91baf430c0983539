"""`embedded_serve()`: the bus a piece of work runs on — the local `codeloop serve`'s when one runs,
else a serve started in this process for as long as the work takes.

`codeloop run`, `replay`, `eval` and the tasks server use it so that they work with no other
set-up: against the serve a `--nats URL` (or `CODELOOP_NATS_URL`) names or the state directory
notes, else on an embedded bus with every role they need in this process. The test kit
(`codeloop.testing`) and the benchmarks use it without joining (`join=False`): always a serve of
their own, on the state directory they give.
"""

from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Literal

import anyio

from bus.config import BusConfig
from codeloop.config.errors import ConfigError
from codeloop.config.serve_note import ServeNote, client_config_for, serve_to_join
from codeloop.wiring.process import Hosting, RoleSetup, Workers, serve

Store = Literal["state_dir", "temporary"]


@dataclass(frozen=True)
class RunningServe:
    """The serve a piece of work runs on."""

    config: BusConfig
    """What a client connects with: the serve's URL and, for an embedded server, its credentials."""
    note: ServeNote | None
    """The note of the serve started here; None when an existing one was joined."""


@asynccontextmanager
async def embedded_serve(
    config: BusConfig,
    *,
    join: bool = True,
    store: Store = "temporary",
    workers: Workers | Callable[[], Workers] = Workers(),
    setup: RoleSetup = RoleSetup(),
    hosting: Hosting = Hosting(),
) -> AsyncIterator[RunningServe]:
    """The serve to work on, for the `async with` block.

    With `join`, the serve `config` names (its servers), else the running serve its state
    directory noted, when there is one. Otherwise `serve()` runs in this process on `config`
    (its nats-server embedded unless `config` names servers) with `workers`, `setup` and
    `hosting`, and is stopped — drained — when the block ends. `workers` may be a function,
    called only when a serve starts here (choosing roles loads the installed ones).

    `store`: where the started serve's bus keeps its streams — `state_dir`, the state
    directory's own store (the tasks of an earlier `codeloop serve`, which a replay needs, and
    tasks that outlive this process), or `temporary`, a directory removed at the end. Scratch
    workspaces and the search index stay in the state directory either way (unless
    `setup.home` says otherwise), so a second run reuses the index.

    Raises:
        the errors of `serve()` (`codeloop.wiring.process`), for a serve started here.
    """
    if join:
        try:
            found = serve_to_join(config)
        except ConfigError:  # a noted serve whose credentials are gone: work without it
            found = None
        if found is not None:
            yield RunningServe(config=found, note=None)
            return
    chosen = workers() if callable(workers) else workers
    setup = replace(setup, home=setup.home or config.state_dir)
    with ExitStack() as temporary:
        own = config
        if store == "temporary":
            made = temporary.enter_context(TemporaryDirectory(prefix="codeloop-serve-"))
            own = config.model_copy(update={"state_dir": Path(made)})
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            note = await tg.start(
                lambda task_status: serve(
                    own,
                    stop=stop,
                    workers=chosen,
                    setup=setup,
                    hosting=hosting,
                    task_status=task_status,
                )
            )
            try:
                yield RunningServe(config=client_config_for(own, note), note=note)
            finally:
                stop.set()
