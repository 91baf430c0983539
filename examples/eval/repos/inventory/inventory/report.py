"""A plain-text stock report for the morning e-mail."""

from inventory.stock import Stock


def low_stock(stock: Stock, threshold: int) -> list[str]:
    """SKUs whose available units are below `threshold`, lowest first, ties by SKU."""
    low = [item for item in stock.items.values() if item.available < threshold]
    return [item.sku for item in sorted(low, key=lambda i: (i.available, i.sku))]


def render(stock: Stock) -> str:
    rows = [f"{'SKU':<10}{'on hand':>9}{'reserved':>10}{'available':>11}"]
    for sku in sorted(stock.items):
        item = stock.items[sku]
        rows.append(f"{sku:<10}{item.on_hand:>9}{item.reserved:>10}{item.available:>11}")
    return "\n".join(rows)
