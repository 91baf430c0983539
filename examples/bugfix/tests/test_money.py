from decimal import Decimal

import pytest

from invoicing.money import Money, to_cents


def test_amounts_round_half_up_to_cents():
    assert to_cents(Decimal("2.345")) == Decimal("2.35")
    assert to_cents(Decimal("2.344")) == Decimal("2.34")


def test_money_adds_and_subtracts_in_one_currency():
    assert Money.of("1.10") + Money.of("2.25") == Money.of("3.35")
    assert Money.of("5") - Money.of("0.01") == Money.of("4.99")


def test_money_refuses_to_mix_currencies():
    with pytest.raises(ValueError, match="EUR and USD"):
        Money.of("1", "EUR") + Money.of("1", "USD")


def test_money_prints_with_two_decimals():
    assert str(Money.of("3")) == "3.00 EUR"
