import pytest

from invoicing import Catalog, Money, Product


@pytest.fixture
def catalog() -> Catalog:
    shop = Catalog()
    shop.add(Product("PEN-01", "Ballpoint pen", Money.of("1.20")))
    shop.add(Product("NB-A5", "Notebook A5", Money.of("3.45")))
    shop.add(Product("BK-PY", "Python pocket guide", Money.of("12.00"), vat_category="reduced"))
    shop.add(Product("GC-50", "Gift card 50", Money.of("50.00"), vat_category="exempt"))
    return shop
