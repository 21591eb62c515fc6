from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ragrade.errors import ConfigError
from ragrade.exam.config import FilterConfig
from ragrade.exam.filters import (
    FilterItem,
    SelfContainment,
    apply_thresholds,
    extra_candidate,
    extra_scores,
    intra_candidate,
    intra_scores,
    mean_choice_words,
    near_duplicates,
    quantile_thresholds,
)
from ragrade.exam.text import ngram_jaccard


class TableEmbedder:
    """Vectors looked up in a table (unknown texts get a fixed orthogonal direction)."""

    name = "table"
    dim = 3

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = {k: np.asarray(v, dtype=np.float64) / np.linalg.norm(v) for k, v in table.items()}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        default = np.array([0.0, 0.0, 1.0])
        return np.stack([self.table.get(t, default) for t in texts]).astype(np.float32)

    def describe(self) -> dict[str, Any]:
        return {"kind": "table"}


def item(q: str, choices: Sequence[str], answer: int = 0, context: str = "") -> FilterItem:
    return FilterItem(q, tuple(choices), answer, context)


# --- self-containment ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("According to the passage, which port does the proxy use?", "points_at_source"),
        ("What does the paper propose for sparse attention?", "points_at_source"),
        ("What do the authors conclude about the outage?", "points_at_source"),
        ("In the documentation, which flag disables caching?", "points_at_source"),
        ("Which setting is described in this text?", "deictic_reference"),
        ("What does the section above say about quotas?", "deictic_reference"),
        ("According to the text, which region is the default?", "according_to"),
        ("Based on the information provided, what is the limit?", "according_to"),
        ("As mentioned above, which flag is required?", "as_mentioned"),
        ('What does the guide "Scaling Redis" recommend for eviction?', "quoted_title"),
    ],
)
def test_self_containment_flags_references_to_the_source(text: str, pattern: str) -> None:
    sc = SelfContainment()
    assert sc.check(text) == pattern


@pytest.mark.parametrize(
    "text",
    [
        "What type is the text field in the Django admin form?",
        "Which paper size does CUPS use by default in Europe?",
        "How does the Kafka consumer commit offsets after a rebalance?",
        "Which section of an ELF file holds the symbol table?",
        'What does the command "git stash pop" do after a conflict?',
    ],
)
def test_self_containment_keeps_self_contained_questions(text: str) -> None:
    assert SelfContainment().check(text) is None


def test_self_containment_checks_choices_and_extra_patterns() -> None:
    sc = SelfContainment(extra_patterns=[r"\bchapter \d+\b"])
    items = [
        item("Which port does Redis use by default?", ["6379", "It is not stated in the passage", "80", "22"]),
        item("What is covered in chapter 3 of the Redis manual?", ["a", "b", "c", "d"]),
        item("Which port does Postgres use by default?", ["5432", "6379", "80", "22"]),
    ]
    res = sc(items)
    assert res.reasons == ["self_containment:points_at_source", "self_containment:custom_1", None]
    assert res.removed == 2


def test_self_containment_bad_regex_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="custom_1"):
        SelfContainment(extra_patterns=["(unclosed"])


# --- similarity scores ----------------------------------------------------------------------------------------


def test_ngram_jaccard_hand_values() -> None:
    assert ngram_jaccard("a b c d", "a b c e", 2) == pytest.approx(2 / 4)
    assert ngram_jaccard("a b c d", "a b c e", 1) == pytest.approx(3 / 5)
    assert ngram_jaccard("a b", "a b", 3) == 1.0  # shorter than n: the whole text is one gram
    assert ngram_jaccard("", "", 1) == 0.0


def test_mean_choice_words_sets_n() -> None:
    assert mean_choice_words(item("q", ["one", "two words", "three words here", "x y z w"])) == 2  # 10/4 -> 2
    assert mean_choice_words(item("q", ["", "", "", ""])) == 1


def test_intra_scores_hand_values() -> None:
    emb = TableEmbedder({"red car": [1, 0, 0], "red cars": [1, 0.1, 0], "blue boat": [0, 1, 0], "green": [1, 1, 0]})
    scores = intra_scores([item("q", ["red car", "red cars", "blue boat", "green"])], emb)
    # n = round(mean words) = round(7/4) = 2: bigrams {red car} vs {red cars} -> 0; unigram sets would share "red"
    assert scores["jaccard"][0] == pytest.approx(0.0)
    assert scores["cosine"][0] == pytest.approx(1 / np.sqrt(1.01), abs=1e-6)


def test_extra_scores_hand_values() -> None:
    emb = TableEmbedder(
        {"ctx": [1, 0, 0], "alpha zeta": [0, 1, 0], "alpha beta gamma": [1, 0, 0], "x": [0, 1, 0], "y": [0, 1, 0]}
    )
    it = FilterItem("q", ("alpha zeta", "alpha beta gamma", "x", "y"), 0, "alpha beta gamma delta")
    emb.table["alpha beta gamma delta"] = emb.table["ctx"]
    scores = extra_scores([it], emb)
    # J(k, c) = |{alpha}| / |{alpha beta gamma delta zeta}| = 1/5; max_i J(k, d_i) = 3/4
    assert scores["jaccard"][0] == pytest.approx(0.75 - 0.2)
    assert scores["cosine"][0] == pytest.approx(1.0 - 0.0)


# --- thresholds -------------------------------------------------------------------------------------------------


def test_quantile_threshold_removes_target_share() -> None:
    scores = {"m": np.arange(1, 11) / 10}  # 0.1 .. 1.0
    t = quantile_thresholds(scores, 0.2)
    assert t["m"] == pytest.approx(0.8)
    res = apply_thresholds("f", scores, FilterConfig(mode="quantile", share=0.2))
    assert res.removed == 2 and res.reasons[-2:] == ["f:m", "f:m"]
    assert res.thresholds == {"mode": "quantile", "thresholds": {"m": 0.8}, "share": 0.2}


def test_quantile_threshold_union_of_metrics_and_ties() -> None:
    a = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 2], dtype=float)
    b = np.array([9, 0, 0, 0, 0, 0, 0, 0, 0, 0], dtype=float)
    res = apply_thresholds("f", {"a": a, "b": b}, FilterConfig(mode="quantile", share=0.2))
    assert res.removed <= 2
    assert res.removed >= 1
    flat = np.full(10, 0.5)
    assert apply_thresholds("f", {"a": flat}, FilterConfig(share=0.3)).removed == 0  # ties: never remove all
    assert apply_thresholds("f", {"a": a}, FilterConfig(share=0.01)).removed == 0  # round(0.1) = 0


def test_fixed_and_off_modes() -> None:
    scores = {"jaccard": np.array([0.1, 0.6]), "cosine": np.array([0.99, 0.2])}
    res = apply_thresholds("f", scores, FilterConfig(mode="fixed", jaccard=0.5, cosine=0.95))
    assert res.reasons == ["f:cosine", "f:jaccard"]
    res = apply_thresholds("f", scores, FilterConfig(mode="fixed", jaccard=0.5))  # no cosine threshold
    assert res.reasons == [None, "f:jaccard"]
    assert apply_thresholds("f", scores, FilterConfig(mode="off")).removed == 0


def test_intra_candidate_filter_removes_paraphrased_distractor(hash_embedder: Any) -> None:
    items = [
        item("Which port?", ["port 6379 on all interfaces", "port 6379 on all interface", "port 80", "port 22"]),
        item("Which region?", ["eu-west-1", "us-east-2", "ap-south-1", "sa-east-1"]),
        item("Which tool?", ["hammer", "screwdriver", "wrench", "pliers"]),
    ]
    res = intra_candidate(items, hash_embedder, FilterConfig(mode="fixed", cosine=0.9, jaccard=0.5))
    assert res.reasons[0] is not None and res.reasons[0].startswith("intra_candidate:")
    assert res.reasons[1:] == [None, None]
    assert res.thresholds["thresholds"] == {"jaccard": 0.5, "cosine": 0.9}


def test_extra_candidate_filter_removes_distractor_closer_to_source(hash_embedder: Any) -> None:
    ctx = "The indexer rebuilds the search index every night at two in the morning to keep queries fast."
    items = [
        FilterItem(
            "When is the index rebuilt?",
            ("once a day", "every night at two in the morning", "every hour", "never"),
            0,
            ctx,
        ),
        FilterItem("When is the index rebuilt?", ("every night at two", "every hour", "weekly", "never"), 0, ctx),
    ]
    res = extra_candidate(items, hash_embedder, FilterConfig(mode="fixed", jaccard=0.05))
    assert res.reasons == ["extra_candidate:jaccard", None]


def test_near_duplicates_keep_the_first(hash_embedder: Any) -> None:
    items = [
        item("Which port does the Redis server listen on by default?", ["6379", "80", "22", "443"]),
        item("Which command lists the running Docker containers?", ["docker ps", "docker ls", "b", "c"]),
        item("Which port does the Redis server listen on by default ?", ["6379", "80", "22", "443"]),
        item("Which command lists the running Docker containers?", ["docker ps", "docker ls", "b", "c"]),
    ]
    res = near_duplicates(items, hash_embedder, FilterConfig(mode="fixed", cosine=0.95))
    assert res.reasons == [None, None, "near_duplicate:cosine", "near_duplicate:exact"]
    off = near_duplicates(items, hash_embedder, FilterConfig(mode="off"))
    assert off.reasons == [None, None, None, "near_duplicate:exact"]  # exact repeats always go


def test_filters_accept_empty_input(hash_embedder: Any) -> None:
    cfg = FilterConfig()
    assert intra_candidate([], hash_embedder, cfg).reasons == []
    assert extra_candidate([], hash_embedder, cfg).reasons == []
    assert near_duplicates([], hash_embedder, cfg).reasons == []
