"""Free slots of a room within opening hours."""

from schedule.bookings import Room
from schedule.intervals import Interval


def free_slots(room: Room, opening: Interval, *, min_minutes: int = 15) -> list[Interval]:
    """Gaps between bookings inside `opening`, shortest allowed `min_minutes`, in time order."""
    free: list[Interval] = []
    cursor = opening.start
    for taken, _holder in sorted(room.bookings):
        if taken.start - cursor >= min_minutes:
            free.append(Interval(cursor, min(taken.start, opening.end)))
        cursor = max(cursor, taken.end)
    if opening.end - cursor >= min_minutes:
        free.append(Interval(cursor, opening.end))
    return free


def total_free(room: Room, opening: Interval) -> int:
    """Free minutes of the day, counting every gap however short."""
    return sum(slot.minutes for slot in free_slots(room, opening, min_minutes=1))
