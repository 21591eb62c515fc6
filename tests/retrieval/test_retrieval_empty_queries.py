"""Queries with no relevant id: unjudged ones skipped and counted, ones judged only not relevant scored 0
(trec_eval), or all scored 0 (ranx); the run never stops."""

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


def test_skip_leaves_out_the_unjudged_and_scores_the_judged_not_relevant_0() -> None:
    r = evaluate_run(RUN, QRELS, 3, n_boot=50)
    assert (r.n_queries, r.n_empty_queries, r.skipped_queries) == (3, 2, ["q3"])  # q4 has a qrels line: kept
    assert r.metrics["hit_rate"].mean == pytest.approx(2 / 3) and r.metrics["recall"].mean == pytest.approx(2 / 3)
    assert r.metrics["mrr"].mean == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert r.metrics["ndcg"].mean == pytest.approx((NDCG_Q1 + NDCG_Q2 + 0) / 3)
    d = r.to_dict(with_queries=True)
    assert (d["n_queries"], d["n_empty_queries"], d["n_skipped_queries"], d["empty_queries"]) == (3, 2, 1, "skip")
    assert [dig(row, "query") for row in as_list(d["per_query"])] == ["q1", "q2", "q4"]
    assert d["skipped_queries"] == ["q3"] and dig(as_list(d["per_query"])[2], "no_relevant") is True


# trec_eval's convention, worked by hand (k = 3) and checked against pytrec-eval-terrier 0.5.11 (trec_eval 9):
# * "normal": judged a (grade 2), b (grade 1), z (grade 0); ranked x, a, z, b -> top 3 is x, a, z.
#   hit 1; recall 1/2 (a of a, b); rr 1/2 (a at rank 2);
#   ndcg = (2 / log2 3) / (2 / log2 2 + 1 / log2 3) = 2 / (1 + 2 log2 3) = 0.4796249331362629
# * "nonrel": judged c and d, both grade 0 (a qrels line, nothing relevant): kept, 0 on every metric
# * "extra": ranked, but no qrels line at all: left out
# means over the two evaluated queries: hit 1/2, recall 1/4, mrr 1/4, ndcg 1 / (1 + 2 log2 3) = 0.23981246656813146
# (skipping "nonrel" too, as ragrade did before, gave 1, 1/2, 1/2 and 0.4796: the bias this guards against)
TREC_QRELS = {"normal": {"a": 2.0, "b": 1.0, "z": 0.0}, "nonrel": {"c": 0.0, "d": 0.0}}
TREC_RUN = {"normal": ["x", "a", "z", "b"], "nonrel": ["c", "d"], "extra": ["a"]}
TREC_MEANS = {"hit_rate": 0.5, "recall": 0.25, "mrr": 0.25, "ndcg": 1 / (1 + 2 * math.log2(3))}


def test_skip_matches_trec_eval_by_hand() -> None:
    r = evaluate_run(TREC_RUN, TREC_QRELS, 3, n_boot=50)
    assert {m: s.mean for m, s in r.metrics.items()} == pytest.approx(TREC_MEANS, abs=1e-12)
    assert r.metrics["ndcg"].mean == pytest.approx(0.23981246656813146, abs=1e-12)
    rows = {str(row["query"]): row for row in r.per_query}
    assert list(rows) == ["normal", "nonrel"] and rows["normal"]["ndcg"] == pytest.approx(0.4796249331362629)
    assert (r.n_queries, r.n_empty_queries, r.skipped_queries) == (2, 1, [])  # "extra" is no qrels query at all
    assert dig(r.to_dict(), "n_skipped_queries") == 0
    # a qrels record with no judged id ("relevant": []) is what trec_eval sees as no qrels line: skipped, counted
    r = evaluate_run(TREC_RUN, {**TREC_QRELS, "unjudged": {}}, 3, n_boot=50)
    assert {m: s.mean for m, s in r.metrics.items()} == pytest.approx(TREC_MEANS, abs=1e-12)
    assert (r.n_queries, r.n_empty_queries, r.skipped_queries) == (2, 2, ["unjudged"])
    assert dig(r.to_dict(), "n_skipped_queries") == 1
    # ranx's convention scores the unjudged one 0 as well: every mean over 3
    r = evaluate_run(TREC_RUN, {**TREC_QRELS, "unjudged": {}}, 3, n_boot=50, empty_queries="zero")
    assert {m: s.mean for m, s in r.metrics.items()} == pytest.approx(
        {m: v * 2 / 3 for m, v in TREC_MEANS.items()}, abs=1e-12
    )
    assert (r.n_queries, r.n_empty_queries, r.skipped_queries) == (3, 2, [])


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


def test_only_unjudged_queries_are_an_error_not_a_table_of_nan() -> None:
    # issue 38.3: a qrels file whose queries all have empty relevant lists printed a table of nan, exit 0
    with pytest.raises(DataError, match="none of the 1 qrels queries has a judged id"):
        evaluate_run({}, {"q3": {}}, 3, n_boot=50)
    r = evaluate_run({}, {"q3": {}}, 3, n_boot=50, empty_queries="zero")  # asked for: each scores 0
    assert r.n_queries == 1 and r.n_empty_queries == 1
    assert dig(r.to_dict(), "metrics", "mrr") == {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.0}
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
    rows: list[dict[str, object]] = [{"query": q, "relevant": [f"fact{i}#c0"]} for i, (_, q, _) in enumerate(FACTS)]
    rows += [{"query": "Who painted the moon?", "relevant": []}, {"query": "Why?", "relevant_chunk_ids": []}]
    rows += [{"query": "Who ate the sun?", "relevant": {"fact0#c0": 0}}]  # judged, not relevant: scored 0
    qrels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    n = len(FACTS)
    base = ["retrieval-eval", str(bm25_index), str(qrels), "-r", "bm25,oracle", "-k", "3", "--n-boot", "50"]
    out_file = tmp_path / "eval.json"
    assert main([*base, "--out", str(out_file)]) == 0
    out, err = capsys.readouterr()
    note = (
        f"3 of {n + 3} queries have no relevant id: 2 with no judged id skipped (left out of every mean), "
        "1 judged only not relevant scored 0 (kept in the means); trec_eval's convention"
    )
    assert f"ragrade: warning: {note}" in err and note in out
    saved = json.loads(out_file.read_text())
    assert (saved["n_queries"], saved["n_empty_queries"], saved["n_skipped_queries"]) == (n + 3, 3, 2)
    assert saved["empty_queries"] == "skip"
    for res in saved["results"]:  # bm25 finds every fact at k=3; the oracle, given no gold for the three, too
        assert (res["n_queries"], res["n_empty_queries"], res["n_skipped_queries"]) == (n + 1, 3, 2)
        assert res["metrics"]["hit_rate"]["mean"] == pytest.approx(n / (n + 1))
        assert res["skipped_queries"] == ["Who painted the moon?", "Why?"]
    assert main([*base, "--empty-queries", "zero", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "3 of" in err and "scored 0 on every metric (ranx's convention)" in err
    got = json.loads(out)
    assert (got["n_empty_queries"], got["n_skipped_queries"], got["empty_queries"]) == (3, 0, "zero")
    for res in got["results"]:
        assert res["n_queries"] == n + 3 and res["metrics"]["hit_rate"]["mean"] == pytest.approx(n / (n + 3))
    assert main([*base, "--empty-queries", "nope"]) == 2
    assert "--empty-queries must be skip or zero" in capsys.readouterr().err
