from decimal import Decimal

import pytest

from invoicing.discounts import discount_rate


def test_no_discount_below_the_first_tier():
    assert discount_rate(1) == Decimal("0")
    assert discount_rate(9) == Decimal("0")


def test_discount_inside_a_tier():
    assert discount_rate(30) == Decimal("0.10")
    assert discount_rate(75) == Decimal("0.15")
    assert discount_rate(250) == Decimal("0.20")


def test_discount_applies_at_the_tier_minimum():
    """The price list says "10% off from 10 units": exactly 10 units get the discount."""
    assert discount_rate(10) == Decimal("0.10")
    assert discount_rate(50) == Decimal("0.15")
    assert discount_rate(100) == Decimal("0.20")


def test_negative_quantity_is_refused():
    with pytest.raises(ValueError):
        discount_rate(-1)
