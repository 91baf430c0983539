"""The shop's catalogue: products by SKU with their unit price and VAT category."""

from dataclasses import dataclass, field

from invoicing.money import Money


class UnknownProduct(KeyError):
    """No product has this SKU."""


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    unit_price: Money
    vat_category: str = "standard"
    """`standard`, `reduced` (books, food) or `exempt`."""


@dataclass
class Catalog:
    products: dict[str, Product] = field(default_factory=dict)

    def add(self, product: Product) -> None:
        if product.sku in self.products:
            raise ValueError(f"duplicate SKU {product.sku!r}")
        self.products[product.sku] = product

    def get(self, sku: str) -> Product:
        try:
            return self.products[sku]
        except KeyError:
            raise UnknownProduct(sku) from None

    def search(self, text: str) -> list[Product]:
        """Products whose name contains `text`, case-insensitively, by name."""
        needle = text.casefold()
        found = [p for p in self.products.values() if needle in p.name.casefold()]
        return sorted(found, key=lambda p: p.name)
