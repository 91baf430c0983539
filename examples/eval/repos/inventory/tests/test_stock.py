import pytest

from inventory.stock import OutOfStock, Stock


def test_receive_adds_to_the_shelf():
    stock = Stock()
    stock.receive("A1", 5)
    assert stock.receive("A1", 3).on_hand == 8


def test_reserving_more_than_available_is_refused():
    stock = Stock()
    stock.receive("A1", 2)
    with pytest.raises(OutOfStock):
        stock.reserve("A1", 3)


def test_all_available_units_can_be_reserved():
    stock = Stock()
    stock.receive("A1", 4)
    assert stock.reserve("A1", 4).available == 0


def test_shipping_takes_units_off_reservation_and_shelf():
    stock = Stock()
    stock.receive("A1", 10)
    stock.reserve("A1", 3)
    item = stock.ship("A1", 2)
    assert (item.on_hand, item.reserved, item.available) == (8, 1, 7)
