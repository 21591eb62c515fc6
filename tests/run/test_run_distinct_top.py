from __future__ import annotations

import pandas as pd

from ragrade.run.compare import distinct_top_pipelines


def _rows(pid: str, chosen: list[int], answer: list[int]) -> list[dict[str, object]]:
    return [
        {"pipeline": pid, "question_id": f"q{i}", "chosen": c, "correct": int(c == a)}
        for i, (c, a) in enumerate(zip(chosen, answer, strict=True))
    ]


def test_identical_twins_are_skipped_and_named() -> None:
    answer = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    best = [*answer[:9], 2]  # 9/10
    rows = (
        _rows("a-icl0", best, answer)
        + _rows("a-icl1", best, answer)  # the same answers: a twin
        + _rows("b", [*answer[:8], 1, 2], answer)  # 8/10
        + _rows("c", [0] * 10, answer)  # 3/10
    )
    df = pd.DataFrame(rows)
    chosen, twins = distinct_top_pipelines(df, 3)
    assert chosen == ["a-icl0", "b", "c"]
    assert twins == {"a-icl1": "a-icl0"}
    chosen, twins = distinct_top_pipelines(df, 2)
    assert chosen == ["a-icl0", "b"] and twins == {"a-icl1": "a-icl0"}


def test_same_accuracy_but_different_answers_are_both_kept() -> None:
    answer = [0, 1, 2, 3]
    df = pd.DataFrame(_rows("x", [0, 1, 0, 0], answer) + _rows("y", [0, 0, 2, 0], answer))
    chosen, twins = distinct_top_pipelines(df, 5)
    assert chosen == ["x", "y"] and twins == {}
