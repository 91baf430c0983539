"""Quantity discounts: the more of one product a line orders, the lower its unit price.

The shop's price list says: "10% off from 10 units, 15% off from 50 units, 20% off from 100
units". A tier applies when the ordered quantity reaches its minimum.
"""

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class DiscountTier:
    min_quantity: int
    rate: Decimal
    """Fraction taken off the line's price, e.g. Decimal("0.10") for 10%."""


DEFAULT_TIERS: tuple[DiscountTier, ...] = (
    DiscountTier(10, Decimal("0.10")),
    DiscountTier(50, Decimal("0.15")),
    DiscountTier(100, Decimal("0.20")),
)


def discount_rate(quantity: int, tiers: tuple[DiscountTier, ...] = DEFAULT_TIERS) -> Decimal:
    """The rate of the highest tier `quantity` reaches; 0 below the first tier."""
    if quantity < 0:
        raise ValueError("quantity must not be negative")
    rate = Decimal("0")
    for tier in sorted(tiers, key=lambda t: t.min_quantity):
        if quantity > tier.min_quantity:
            rate = tier.rate
    return rate
