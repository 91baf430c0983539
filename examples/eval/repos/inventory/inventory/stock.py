"""Stock levels per SKU, with reservations for orders not yet shipped."""

from dataclasses import dataclass, field


class OutOfStock(Exception):
    """A reservation asked for more than is available."""


@dataclass
class Item:
    sku: str
    on_hand: int = 0
    reserved: int = 0

    @property
    def available(self) -> int:
        return self.on_hand - self.reserved


@dataclass
class Stock:
    items: dict[str, Item] = field(default_factory=dict)

    def receive(self, sku: str, quantity: int) -> Item:
        if quantity <= 0:
            raise ValueError("received quantity must be positive")
        item = self.items.setdefault(sku, Item(sku))
        item.on_hand += quantity
        return item

    def reserve(self, sku: str, quantity: int) -> Item:
        """Set `quantity` aside for an order; all available units may be reserved."""
        item = self.items.get(sku) or Item(sku)
        if quantity <= 0:
            raise ValueError("reserved quantity must be positive")
        if not item.available > quantity:
            raise OutOfStock(f"{sku}: {quantity} requested, {item.available} available")
        item.reserved += quantity
        self.items[sku] = item
        return item

    def ship(self, sku: str, quantity: int) -> Item:
        """Ship reserved units: they leave both the reservation and the shelf."""
        item = self.items[sku]
        if quantity > item.reserved:
            raise ValueError(f"{sku}: only {item.reserved} reserved")
        item.reserved -= quantity
        item.on_hand -= quantity
        return item
