"""An invoice: lines of (product, quantity), each discounted by quantity, then VAT per category."""

from dataclasses import dataclass, field
from decimal import Decimal

from invoicing.catalog import Catalog, Product
from invoicing.discounts import discount_rate
from invoicing.money import Money, zero
from invoicing.tax import vat_on


@dataclass(frozen=True)
class InvoiceLine:
    product: Product
    quantity: int

    @property
    def gross(self) -> Money:
        """Unit price times quantity, before any discount."""
        return self.product.unit_price.times(self.quantity)

    @property
    def discount(self) -> Money:
        return self.gross.times(discount_rate(self.quantity))

    @property
    def net(self) -> Money:
        return self.gross - self.discount

    @property
    def vat(self) -> Money:
        return vat_on(self.net, self.product.vat_category)


@dataclass
class Invoice:
    catalog: Catalog
    number: str
    lines: list[InvoiceLine] = field(default_factory=list)

    def add(self, sku: str, quantity: int) -> InvoiceLine:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        line = InvoiceLine(self.catalog.get(sku), quantity)
        self.lines.append(line)
        return line

    def net_total(self) -> Money:
        return sum((line.net for line in self.lines), zero())

    def vat_total(self) -> Money:
        return sum((line.vat for line in self.lines), zero())

    def total(self) -> Money:
        return self.net_total() + self.vat_total()

    def vat_breakdown(self) -> dict[str, Money]:
        """VAT owed per category, only for categories on the invoice."""
        breakdown: dict[str, Money] = {}
        for line in self.lines:
            category = line.product.vat_category
            breakdown[category] = breakdown.get(category, zero()) + line.vat
        return breakdown

    def render(self) -> str:
        rows = [f"Invoice {self.number}"]
        for line in self.lines:
            rate = discount_rate(line.quantity) * Decimal(100)
            rows.append(f"{line.quantity:>4} x {line.product.name:<20} {line.net}  (-{rate:.0f}%)")
        rows.append(f"Net: {self.net_total()}  VAT: {self.vat_total()}  Total: {self.total()}")
        return "\n".join(rows)
