import pytest

from invoicing import Invoice, Money


def test_small_order_has_no_discount(catalog):
    invoice = Invoice(catalog, "2024-001")
    invoice.add("PEN-01", 3)
    assert invoice.net_total() == Money.of("3.60")
    assert invoice.vat_total() == Money.of("0.72")
    assert invoice.total() == Money.of("4.32")


def test_ten_notebooks_get_the_bulk_discount(catalog):
    """A customer's order of exactly 10 notebooks: 34.50 gross, 10% off, 20% VAT."""
    invoice = Invoice(catalog, "2024-002")
    invoice.add("NB-A5", 10)
    assert invoice.net_total() == Money.of("31.05")
    assert invoice.total() == Money.of("37.26")


def test_vat_breakdown_per_category(catalog):
    invoice = Invoice(catalog, "2024-003")
    invoice.add("PEN-01", 2)
    invoice.add("BK-PY", 1)
    invoice.add("GC-50", 1)
    assert invoice.vat_breakdown() == {
        "standard": Money.of("0.48"),
        "reduced": Money.of("0.66"),
        "exempt": Money.of("0"),
    }


def test_quantity_must_be_positive(catalog):
    with pytest.raises(ValueError):
        Invoice(catalog, "2024-004").add("PEN-01", 0)


def test_render_shows_lines_and_totals(catalog):
    invoice = Invoice(catalog, "2024-005")
    invoice.add("NB-A5", 20)
    text = invoice.render()
    assert text.splitlines()[0] == "Invoice 2024-005"
    assert "(-10%)" in text
    assert "Total: 74.52 EUR" in text
