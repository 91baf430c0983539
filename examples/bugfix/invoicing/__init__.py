"""Invoices for a small shop: catalogue prices, quantity discounts, VAT and totals."""

from invoicing.catalog import Catalog, Product
from invoicing.discounts import DiscountTier, discount_rate
from invoicing.invoice import Invoice, InvoiceLine
from invoicing.money import Money

__all__ = ["Catalog", "DiscountTier", "Invoice", "InvoiceLine", "Money", "Product", "discount_rate"]
