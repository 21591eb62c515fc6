"""The prefix-tree layout of batched scoring, worked by hand."""

from __future__ import annotations

from ragrade.llm.prefix_tree import Item, layout_row, plan_batches, plan_rows, subtree_ends


def test_two_requests_sharing_a_prefix_laid_out_by_hand() -> None:
    a = Item(ctx=(1, 2, 3), conts=((4, 5), (6,)))
    b = Item(ctx=(1, 2, 7), conts=((8,),))
    row = layout_row([a, b], [0, 1])
    # paths (1,2,3), (1,2,3,4), (1,2,7): the shared (1,2) once, the last option tokens never as inputs
    assert row.tokens == [1, 2, 3, 4, 7]
    assert row.depth == [0, 1, 2, 3, 2]
    assert row.end == [5, 5, 4, 4, 5]
    # a: option (4,5) is read at node 2 (token 4) and node 3 (token 5); option (6,) at node 2; b: (8,) at node 4
    assert row.targets == [[[(2, 4), (3, 5)], [(2, 6)]], [[(4, 8)]]]
    # node 4 (token 7) attends to exactly its ancestors 0, 1 and itself
    assert [k for k in range(5) if k <= 4 < row.end[k]] == [0, 1, 4]
    assert a.cost == 4 and a.plain == (3 + 2 - 1) + (3 + 1 - 1)


def test_subtree_ends_of_a_forest() -> None:
    assert subtree_ends([0, 1, 2, 0, 1, 1]) == [3, 3, 3, 6, 5, 6]


def test_rows_share_only_long_prefixes_and_batches_respect_the_budget() -> None:
    system = tuple(range(100, 140))
    near = [Item((*system, i, i + 1), ((7, 8),)) for i in range(3)]  # share 40 of ~43 positions
    far = Item((9,) * 30, ((1,),))
    rows = plan_rows([*near, far], row_cap=1000)
    assert sorted(len(r.items) for r in rows) == [1, 3]
    assert sum(len(r) for r in rows) == 40 + 3 * 3 + 30  # the 40 shared tokens once
    alone = plan_rows([*near, far], row_cap=1000, share=False)
    assert len(alone) == 4 and sum(len(r) for r in alone) == 3 * 43 + 30
    capped = plan_rows(near, row_cap=46)  # 43 + 3 fits, a third request would not
    assert len(capped) == 2
    batches = plan_batches(alone, token_budget=90)
    assert [[len(r) for r in b] for b in batches] == [[43, 43], [43, 30]]
    assert plan_batches(alone, token_budget=10) == [[r] for r in sorted(alone, key=len, reverse=True)]
