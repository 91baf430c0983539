from inventory.report import render
from inventory.stock import Stock


def test_render_lists_skus_in_order():
    stock = Stock()
    stock.receive("B2", 1)
    stock.receive("A1", 2)
    lines = render(stock).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["A1", "B2"]
