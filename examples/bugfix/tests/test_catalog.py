import pytest

from invoicing import Money, Product
from invoicing.catalog import UnknownProduct


def test_catalog_finds_products_by_sku(catalog):
    assert catalog.get("PEN-01").name == "Ballpoint pen"


def test_unknown_sku_raises(catalog):
    with pytest.raises(UnknownProduct):
        catalog.get("NOPE")


def test_duplicate_sku_is_refused(catalog):
    with pytest.raises(ValueError, match="duplicate"):
        catalog.add(Product("PEN-01", "Another pen", Money.of("2")))


def test_search_is_case_insensitive_and_sorted(catalog):
    assert [p.sku for p in catalog.search("NOTE")] == ["NB-A5"]
    assert [p.sku for p in catalog.search("o")] == ["PEN-01", "NB-A5", "BK-PY"]
