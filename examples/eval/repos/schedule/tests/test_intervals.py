import pytest

from schedule.intervals import Interval, overlaps, parse


def test_parse_reads_clock_times():
    assert parse("09:30-10:15") == Interval(570, 615)


def test_empty_interval_is_refused():
    with pytest.raises(ValueError):
        Interval(600, 600)


def test_overlapping_intervals_overlap():
    assert overlaps(parse("09:00-10:00"), parse("09:30-11:00"))


def test_touching_and_separate_intervals_do_not_overlap():
    assert not overlaps(parse("10:00-11:00"), parse("11:00-12:00"))
    assert not overlaps(parse("08:00-09:00"), parse("13:00-14:00"))
