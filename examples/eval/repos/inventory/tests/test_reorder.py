from inventory.reorder import Policy, reorder_list, suggested_quantity
from inventory.stock import Stock


def test_no_order_above_the_reorder_point():
    assert suggested_quantity(11, Policy(reorder_point=10, target_level=50)) == 0


def test_order_up_to_target_in_whole_packs():
    assert suggested_quantity(10, Policy(reorder_point=10, target_level=50, pack_size=12)) == 48


def test_reorder_list_covers_unknown_skus():
    stock = Stock()
    stock.receive("A1", 100)
    policies = {"A1": Policy(10, 50), "B2": Policy(5, 20)}
    assert reorder_list(stock, policies) == {"B2": 20}
