"""Retrieval metrics: hand-worked values, agreement with ranx, bootstrap intervals, qrels parsing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ragrade.errors import DataError
from ragrade.retrieval.metrics import evaluate_run, per_query, read_qrels


def test_per_query_hand_worked() -> None:
    m = per_query(["x", "a", "y", "b"], {"a": 1, "b": 1, "c": 1}, k=4)
    assert m["hit_rate"] == 1.0
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["mrr"] == pytest.approx(0.5)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert m["ndcg"] == pytest.approx(dcg / idcg)
    cut = per_query(["x", "a", "y", "b"], {"a": 1, "b": 1, "c": 1}, k=1)
    assert cut == {"hit_rate": 0.0, "recall": 0.0, "mrr": 0.0, "ndcg": 0.0}


def test_graded_ndcg_hand_worked() -> None:
    m = per_query(["b", "a"], {"a": 3, "b": 1}, k=2)
    assert m["ndcg"] == pytest.approx((1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3)))


def test_duplicates_in_ranking_count_once() -> None:
    m = per_query(["a", "a", "b"], {"b": 1}, k=2)
    assert m["mrr"] == pytest.approx(0.5)


def test_no_relevant_is_an_error() -> None:
    with pytest.raises(DataError):
        per_query(["a"], {"b": 0}, k=1)


_RANX_SCRIPT = """
import json, sys
import ranx
data = json.load(sys.stdin)
qrels = ranx.Qrels({q: {d: int(g) for d, g in rel.items()} for q, rel in data["qrels"].items()})
run = ranx.Run({q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in data["run"].items()})
print(json.dumps({m: float(v) for m, v in ranx.evaluate(qrels, run, data["metrics"]).items()}))
"""


def test_agrees_with_ranx() -> None:
    """Reference values from ranx, run in a subprocess with numba's JIT off (compiling takes minutes)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("ranx")
    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(40)]
    qrels: dict[str, dict[str, float]] = {}
    run: dict[str, list[str]] = {}
    for q in range(25):
        rel = rng.choice(docs, size=int(rng.integers(1, 5)), replace=False)
        qrels[f"q{q}"] = {str(d): float(rng.integers(1, 4)) for d in rel}
        run[f"q{q}"] = [str(d) for d in rng.permutation(docs)[:15]]
    k = 10
    metrics = [f"hit_rate@{k}", f"recall@{k}", f"mrr@{k}", f"ndcg@{k}"]
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _RANX_SCRIPT],
        input=json.dumps({"qrels": qrels, "run": run, "metrics": metrics}),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    ref = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = evaluate_run(run, qrels, k, n_boot=200)
    for name in ("hit_rate", "recall", "mrr", "ndcg"):
        assert ours.metrics[name].mean == pytest.approx(ref[f"{name}@{k}"], abs=1e-9), name
        s = ours.metrics[name]
        assert s.low <= s.mean <= s.high
    assert 0 < ref[f"ndcg@{k}"] < 1 and 0 < ref[f"recall@{k}"] < 1  # a non-trivial case


def test_bootstrap_interval_is_seeded_and_sensible() -> None:
    run = {f"q{i}": ["a"] if i % 2 else ["b"] for i in range(50)}
    qrels: dict[str, dict[str, float]] = {f"q{i}": {"a": 1.0} for i in range(50)}
    r1 = evaluate_run(run, qrels, 1, n_boot=500, seed=3)
    r2 = evaluate_run(run, qrels, 1, n_boot=500, seed=3)
    hr = r1.metrics["hit_rate"]
    assert hr.mean == pytest.approx(0.5)
    assert 0.3 < hr.low < 0.5 < hr.high < 0.7
    assert (hr.low, hr.high) == (r2.metrics["hit_rate"].low, r2.metrics["hit_rate"].high)


def test_missing_run_query_is_an_error() -> None:
    with pytest.raises(DataError, match="no ranking"):
        evaluate_run({}, {"q": {"a": 1.0}}, 5)


def test_read_qrels_formats(tmp_path: Path) -> None:
    p = tmp_path / "qrels.jsonl"
    lines = [
        {"query": "q1", "relevant": ["a", "b"]},
        {"query": "q2", "relevant": {"c": 2}},
        {"query": "q3", "chunk_id": "d", "doc_id": "D"},
        {"question": "q4", "chunk_id": "e", "doc_id": "E"},
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    q = read_qrels(p)
    assert q == {"q1": {"a": 1.0, "b": 1.0}, "q2": {"c": 2.0}, "q3": {"d": 1.0}, "q4": {"e": 1.0}}
    assert read_qrels(p, level="doc")["q4"] == {"E": 1.0}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query": "q"}) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl:1: no relevant ids"):
        read_qrels(bad)
