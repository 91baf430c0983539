"""Reorder suggestions: when available stock falls to the reorder point, order up to the target."""

from dataclasses import dataclass

from inventory.stock import Stock


@dataclass(frozen=True)
class Policy:
    reorder_point: int
    target_level: int
    pack_size: int = 1
    """Suppliers sell in packs: a suggested quantity is rounded up to whole packs."""


def suggested_quantity(available: int, policy: Policy) -> int:
    """Units to order now; 0 while `available` is above the reorder point."""
    if available > policy.reorder_point:
        return 0
    missing = policy.target_level - available
    packs = -(-missing // policy.pack_size)  # ceiling division
    return packs * policy.pack_size


def reorder_list(stock: Stock, policies: dict[str, Policy]) -> dict[str, int]:
    """SKU -> quantity to order, for the SKUs that need it, sorted by SKU."""
    wanted = {}
    for sku in sorted(policies):
        item = stock.items.get(sku)
        quantity = suggested_quantity(item.available if item else 0, policies[sku])
        if quantity:
            wanted[sku] = quantity
    return wanted
