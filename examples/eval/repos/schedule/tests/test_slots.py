from schedule.bookings import Room
from schedule.intervals import Interval, parse
from schedule.slots import free_slots, total_free


def test_free_slots_between_bookings():
    room = Room("Aula", [(parse("09:00-10:00"), "a"), (parse("12:00-13:00"), "b")])
    assert free_slots(room, parse("08:00-14:00")) == [
        parse("08:00-09:00"),
        parse("10:00-12:00"),
        parse("13:00-14:00"),
    ]


def test_total_free_of_an_empty_room_is_the_opening():
    assert total_free(Room("Aula"), Interval(480, 1080)) == 600
