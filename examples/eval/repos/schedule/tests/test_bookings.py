import pytest

from schedule.bookings import Conflict, Room
from schedule.intervals import parse


def test_a_booking_inside_another_conflicts():
    room = Room("Aula")
    room.book(parse("09:00-12:00"), "alice")
    with pytest.raises(Conflict, match="alice"):
        room.book(parse("10:00-10:30"), "bob")


def test_conflicts_names_the_holders():
    room = Room("Aula")
    room.book(parse("09:00-10:00"), "alice")
    assert room.conflicts(parse("09:30-09:45")) == ["alice"]
