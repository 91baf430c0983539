"""A task's timeline as its page shows it: the newest events, and the older ones a page at a time.

A task with hundreds of events made a page that took longer to read from the bus, to render and
to lay out in a browser than a person waits for, and nobody reads 500 rows at once. So a page
shows the newest `PAGE_ROWS` rows and a "show earlier" control that fetches the page before them
(`/tasks/ID/events?before=SEQ`); the live stream appends after the newest, as before.

The stored events of a task only grow (the events stream is append-only; old ones age out after
a week), so each task's events are kept here as read, unparsed, and a later view reads only those
after the last one kept: a page shown again, or its earlier pages, costs one empty read of the
bus. An event is parsed and rendered (`render_row`, the page's row markup) the first time a page
shows it, and kept so: a hundred rows through the template again cost more than all the rest of a
page. The tasks kept are the most recently viewed, up to `MAX_KEPT_EVENTS` events in all.
"""

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from bus.connection import Bus
from bus.envelope import parse_envelope
from bus.errors import MalformedMessage
from codeloop.console.events import EventRow, RawEvent, Stored, event_row, read_raw_events

PAGE_ROWS = 100
"""Rows a task's page shows at first, and each "show earlier" adds."""
MAX_KEPT_EVENTS = 50_000
"""Events kept over all tasks (a few tens of MB at most); past it, the least recently viewed
tasks are dropped, and read again when next viewed."""


@dataclass(frozen=True)
class TimelinePage:
    """Rows of a task's timeline, oldest first, and where they sit among its events."""

    rows: list[str]
    """Each row as `render_row` made it."""
    last_seq: int
    """The newest stored event's stream sequence: the page's stream follows from the next one."""
    first_seq: int
    """The stream sequence of the oldest row shown: the next "show earlier" asks for those before it."""
    earlier: int
    """How many stored events are older than the rows shown."""


@dataclass
class _Kept:
    """One task's stored events as read so far, and the rows made of them."""

    seqs: list[int] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)
    rows: dict[int, str | None] = field(default_factory=dict)
    """seq -> its rendered row, made when first shown; None for a malformed event (never shown)."""
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    @property
    def last_seq(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def extend(self, raw: list[RawEvent]) -> None:
        for event in raw:
            if event.seq > self.last_seq:
                self.seqs.append(event.seq)
                self.data.append(event.data)

    def row(self, index: int, render_row: Callable[[EventRow], str]) -> str | None:
        seq = self.seqs[index]
        if seq not in self.rows:
            try:
                self.rows[seq] = render_row(event_row(Stored(seq, parse_envelope(self.data[index]))))
            except MalformedMessage:
                self.rows[seq] = None
        return self.rows[seq]


class Timelines:
    """The console's view of its tasks' timelines: see the module docstring."""

    def __init__(
        self, bus: Bus, render_row: Callable[[EventRow], str], *, max_kept_events: int = MAX_KEPT_EVENTS
    ) -> None:
        self.bus = bus
        self.render_row = render_row
        self.max_kept_events = max_kept_events
        self._kept: OrderedDict[str, _Kept] = OrderedDict()

    async def page(
        self, task_id: str, *, before: int | None = None, limit: int | None = PAGE_ROWS
    ) -> TimelinePage:
        """The newest `limit` rows (None: all) of the task's events older than stream sequence
        `before` (None: the newest there are, read from the bus first)."""
        kept = self._kept.get(task_id)
        if kept is None:
            kept = self._kept[task_id] = _Kept()
        self._kept.move_to_end(task_id)
        if before is None or not kept.seqs:
            async with kept.lock:
                kept.extend(await read_raw_events(self.bus, task_id, after=kept.last_seq))
            self._forget_beyond_limit()
        end = len(kept.seqs) if before is None else bisect_left(kept.seqs, before)
        rows: list[str] = []
        start = end
        while start > 0 and (limit is None or len(rows) < limit):
            start -= 1
            row = kept.row(start, self.render_row)
            if row is not None:
                rows.append(row)
        rows.reverse()
        first = kept.seqs[start] if start < end else (before or kept.last_seq + 1)
        return TimelinePage(rows=rows, last_seq=kept.last_seq, first_seq=first, earlier=start)

    def _forget_beyond_limit(self) -> None:
        total = sum(len(k.seqs) for k in self._kept.values())
        while total > self.max_kept_events and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            total -= len(dropped.seqs)
