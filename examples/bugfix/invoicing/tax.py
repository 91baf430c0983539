"""VAT by category; rates as the shop's tax adviser gave them."""

from decimal import Decimal

from invoicing.money import Money

VAT_RATES: dict[str, Decimal] = {
    "standard": Decimal("0.20"),
    "reduced": Decimal("0.055"),
    "exempt": Decimal("0"),
}


def vat_rate(category: str) -> Decimal:
    try:
        return VAT_RATES[category]
    except KeyError:
        known = ", ".join(sorted(VAT_RATES))
        raise ValueError(f"unknown VAT category {category!r}; expected one of {known}") from None


def vat_on(net: Money, category: str) -> Money:
    """The VAT owed on a net amount, rounded to cents."""
    return net.times(vat_rate(category))
