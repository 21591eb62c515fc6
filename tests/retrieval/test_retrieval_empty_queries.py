"""Queries with no relevant id: skipped and counted (trec_eval) or scored 0 (ranx); the run never stops."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tests.retrieval.retrieval_data import FACTS, fact_chunks
from tests.support.typed import as_list, dig

from ragrade.cli.main import main
from ragrade.corpus.files import write_chunks
from ragrade.errors import DataError
from ragrade.retrieval.metrics import evaluate_run, read_qrels

# q1: relevant a at rank 2; q2: relevant b (rank 1) and c (rank 3); q3: no judged id; q4: d judged not relevant
QRELS = {"q1": {"a": 1.0}, "q2": {"b": 1.0, "c": 1.0}, "q3": {}, "q4": {"d": 0.0}}
RUN = {"q1": ["x", "a"], "q2": ["b", "y", "c"]}
NDCG_Q1 = (1 / math.log2(3)) / 1.0
NDCG_Q2 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))


def test_skip_leaves_them_out_and_counts_them() -> None:
    r = evaluate_run(RUN, QRELS, 3, n_boot=50)
    assert (r.n_queries, r.n_empty_queries, r.skipped_queries) == (2, 2, ["q3", "q4"])
    assert r.metrics["hit_rate"].mean == 1.0 and r.metrics["recall"].mean == 1.0
    assert r.metrics["mrr"].mean == pytest.approx((1 / 2 + 1) / 2)
    assert r.metrics["ndcg"].mean == pytest.approx((NDCG_Q1 + NDCG_Q2) / 2)
    d = r.to_dict(with_queries=True)
    assert (d["n_queries"], d["n_empty_queries"], d["empty_queries"]) == (2, 2, "skip")
    assert [dig(row, "query") for row in as_list(d["per_query"])] == ["q1", "q2"] and d["skipped_queries"] == [
        "q3",
        "q4",
    ]


def test_zero_scores_them_zero_in_the_denominator() -> None:
    r = evaluate_run(RUN, QRELS, 3, n_boot=50, empty_queries="zero")
    assert (r.n_queries, r.n_empty_queries, r.skipped_queries) == (4, 2, [])
    assert r.metrics["hit_rate"].mean == 0.5 and r.metrics["recall"].mean == 0.5
    assert r.metrics["mrr"].mean == pytest.approx((1 / 2 + 1 + 0 + 0) / 4)
    assert r.metrics["ndcg"].mean == pytest.approx((NDCG_Q1 + NDCG_Q2) / 4)
    rows = {row["query"]: row for row in r.per_query}
    assert rows["q3"]["no_relevant"] is True and rows["q4"]["ndcg"] == 0.0 and "no_relevant" not in rows["q1"]
    # ranx 0.3.21 on q1, q2, q4 (q4 judged, nothing relevant): hit_rate@3 = recall@3 = 2/3, mrr@3 0.5, ndcg@3 below
    r = evaluate_run(RUN, {q: QRELS[q] for q in ("q1", "q2", "q4")}, 3, n_boot=50, empty_queries="zero")
    assert r.metrics["ndcg"].mean == pytest.approx(0.5168835142398817, abs=1e-12)
    assert (r.metrics["mrr"].mean, r.metrics["recall"].mean) == pytest.approx((0.5, 2 / 3))


def test_only_empty_queries_give_no_number_and_no_error() -> None:
    r = evaluate_run({}, {"q3": {}}, 3, n_boot=50)
    assert r.n_queries == 0 and r.n_empty_queries == 1
    assert dig(r.to_dict(), "metrics", "mrr") == {"mean": None, "ci_low": None, "ci_high": None}  # JSON, not NaN
    with pytest.raises(DataError, match="skip or zero"):
        evaluate_run(RUN, QRELS, 3, empty_queries="drop")  # type: ignore[arg-type]


def test_read_qrels_keeps_queries_without_relevant_ids(tmp_path: Path) -> None:
    p = tmp_path / "qrels.jsonl"
    lines = [
        {"query": "q1", "relevant": ["a"]},
        {"query": "q3", "relevant": []},
        {"query": "q4", "relevant": {"d": 0}},
        {"query": "q5", "relevant_chunk_ids": []},
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert read_qrels(p) == {"q1": {"a": 1.0}, "q3": {}, "q4": {"d": 0.0}, "q5": {}}


@pytest.fixture(scope="module")
def bm25_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("empty")
    write_chunks(base / "chunks.jsonl", fact_chunks())
    assert main(["index", str(base / "chunks.jsonl"), "--out", str(base / "idx"), "--no-dense"]) == 0
    return base / "idx"


def test_cli_warns_counts_and_writes_the_count(
    bm25_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = tmp_path / "qrels.jsonl"
    rows = [{"query": q, "relevant": [f"fact{i}#c0"]} for i, (_, q, _) in enumerate(FACTS)]
    rows += [{"query": "Who painted the moon?", "relevant": []}, {"query": "Why?", "relevant_chunk_ids": []}]
    qrels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    n = len(FACTS)
    base = ["retrieval-eval", str(bm25_index), str(qrels), "-r", "bm25,oracle", "-k", "3", "--n-boot", "50"]
    out_file = tmp_path / "eval.json"
    assert main([*base, "--out", str(out_file)]) == 0
    out, err = capsys.readouterr()
    note = f"2 of {n + 2} queries have no relevant id, skipped"
    assert f"ragrade: warning: {note}" in err and note in out and "trec_eval" in out
    saved = json.loads(out_file.read_text())
    assert (saved["n_queries"], saved["n_empty_queries"], saved["empty_queries"]) == (n + 2, 2, "skip")
    for res in saved["results"]:  # bm25 finds every fact at k=3; the oracle, given no gold for the two, too
        assert res["n_queries"] == n and res["n_empty_queries"] == 2 and res["metrics"]["hit_rate"]["mean"] == 1.0
        assert res["skipped_queries"] == ["Who painted the moon?", "Why?"]
    assert main([*base, "--empty-queries", "zero", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "scored 0 on every metric" in err
    got = json.loads(out)
    assert got["n_empty_queries"] == 2 and got["empty_queries"] == "zero"
    for res in got["results"]:
        assert res["n_queries"] == n + 2 and res["metrics"]["hit_rate"]["mean"] == pytest.approx(n / (n + 2))
    assert main([*base, "--empty-queries", "nope"]) == 2
    assert "--empty-queries must be skip or zero" in capsys.readouterr().err
