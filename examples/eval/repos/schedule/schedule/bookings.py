"""A room's bookings; a new booking may not overlap an existing one."""

from dataclasses import dataclass, field

from schedule.intervals import Interval, overlaps


class Conflict(Exception):
    """The requested time overlaps a booking."""


@dataclass
class Room:
    name: str
    bookings: list[tuple[Interval, str]] = field(default_factory=list)

    def book(self, when: Interval, who: str) -> None:
        for taken, holder in self.bookings:
            if overlaps(when, taken):
                raise Conflict(f"{self.name} is booked by {holder} then")
        self.bookings.append((when, who))
        self.bookings.sort()

    def conflicts(self, when: Interval) -> list[str]:
        return [holder for taken, holder in self.bookings if overlaps(when, taken)]
