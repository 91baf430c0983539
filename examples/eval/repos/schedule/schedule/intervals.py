"""Half-open time intervals [start, end) in minutes since midnight."""

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ValueError(f"empty interval [{self.start}, {self.end})")

    @property
    def minutes(self) -> int:
        return self.end - self.start


def overlaps(a: Interval, b: Interval) -> bool:
    """True when the two intervals share a minute; touching intervals (10:00-11:00 and
    11:00-12:00) do not overlap."""
    return a.start < b.end or b.start < a.end


def parse(text: str) -> Interval:
    """`"09:30-10:15"` -> Interval(570, 615)."""
    first, _, second = text.partition("-")
    return Interval(_minutes(first), _minutes(second))


def _minutes(clock: str) -> int:
    hours, _, minutes = clock.strip().partition(":")
    return int(hours) * 60 + int(minutes or 0)
