from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ragrade.errors import DataError
from ragrade.robust.build import BuildOptions, build_instance, build_rgb_instance, noise_count
from ragrade.robust.data import RGBItem, load_rgb, normalise_answer, parse_item, write_rgb

DATA = Path(__file__).parent / "data"


def _write(tmp_path: Path, lines: list[object]) -> Path:
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return p


def test_answers_normalise_to_parts_of_aliases() -> None:
    assert normalise_answer("Norway", "w") == (("Norway",),)
    assert normalise_answer(2022, "w") == (("2022",),)
    assert normalise_answer(["A", "B"], "w") == (("A",), ("B",))  # each string is a required part
    assert normalise_answer([["A", "a1"], "B"], "w") == (("A", "a1"), ("B",))
    with pytest.raises(DataError, match="empty"):
        normalise_answer([[]], "f:3")


@pytest.mark.parametrize(
    "name,kind",
    [
        ("en_base", "base"),
        ("zh_base", "base"),
        ("en_int", "integration"),
        ("zh_int", "integration"),
        ("en_fact", "counterfactual"),
        ("zh_fact", "counterfactual"),
    ],
)
def test_fixture_files_load(name: str, kind: str) -> None:
    data = load_rgb(DATA / f"{name}.jsonl")
    assert data.kind == kind
    assert all(it.answer for it in data.items)


def test_integration_accepts_the_misspelled_answer1_key() -> None:
    data = load_rgb(DATA / "en_int.jsonl")
    item = {it.id: it for it in data.items}["11"]
    assert item.answer == (("Ada Brenn",), ("Kolm & Sons", "Kolm and Sons"))
    assert len(item.positive_groups) == 2


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"query": "q", "answer": "a", "positive": [], "negative": []}, "missing 'id'"),
        ({"id": 1, "query": "", "answer": "a", "positive": [], "negative": []}, "'query'"),
        ({"id": 1, "query": "q", "positive": [], "negative": []}, "missing 'answer'"),
        ({"id": 1, "query": "q", "answer": "a", "positive": "doc", "negative": []}, "'positive' must be a list"),
        ({"id": 1, "query": "q", "answer": "a", "positive": [], "negative": [3]}, "'negative' must be a list"),
        ({"id": 1, "query": "q", "answer": ["a"], "positive": [["d"], ["e"]], "negative": []}, "1 answer parts"),
        ({"id": 1, "query": "q", "answer": "a", "fakeanswer": "b", "positive": []}, "needs both"),
        ({"id": 1, "query": "q", "answer": True, "positive": [], "negative": []}, "must be a non-empty"),
    ],
)
def test_malformed_records_name_file_and_line(tmp_path: Path, record: dict[str, object], message: str) -> None:
    good = {"id": 0, "query": "q", "answer": "a", "positive": ["a"], "negative": []}
    positive = record.get("positive")
    if "fakeanswer" in record or (isinstance(positive, list) and positive and isinstance(positive[0], list)):
        good = record  # shapes differ: test the record alone
        path = _write(tmp_path, [record])
        line = 1
    else:
        path = _write(tmp_path, [good, record])
        line = 2
    with pytest.raises(DataError, match=message) as err:
        load_rgb(path)
    assert f"{path}:{line}" in str(err.value)


def test_duplicate_ids_mixed_shapes_and_empty_files_are_errors(tmp_path: Path) -> None:
    rec = {"id": 0, "query": "q", "answer": "a", "positive": ["a"], "negative": []}
    with pytest.raises(DataError, match="duplicate id '0'"):
        load_rgb(_write(tmp_path, [rec, rec]))
    other = {"id": 1, "query": "q", "answer": ["a"], "positive": [["a"]], "negative": []}
    with pytest.raises(DataError, match="different shapes"):
        load_rgb(_write(tmp_path, [rec, other]))
    (tmp_path / "e.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="no records"):
        load_rgb(tmp_path / "e.jsonl")
    with pytest.raises(DataError, match="expected counterfactual"):
        load_rgb(_write(tmp_path, [rec]), kind="counterfactual")
    p = _write(tmp_path, [rec])
    p.write_text(p.read_text() + "{not json\n")
    with pytest.raises(DataError, match=r":2: not valid JSON"):
        load_rgb(p)


def test_write_and_reload_round_trip(tmp_path: Path) -> None:
    data = load_rgb(DATA / "en_fact.jsonl")
    write_rgb(tmp_path / "x.jsonl", data.items)
    again = load_rgb(tmp_path / "x.jsonl")
    assert [(i.id, i.answer, i.positive_wrong, i.fakeanswer) for i in again.items] == [
        (i.id, i.answer, i.positive_wrong, i.fakeanswer) for i in data.items
    ]


def test_noise_count_uses_exact_decimals() -> None:
    assert [noise_count(5, r) for r in (0, 0.2, 0.4, 0.6, 0.8, 1.0)] == [0, 1, 2, 3, 4, 5]
    assert noise_count(10, 0.7) == 7  # 10 * 0.7 is 7.000000000000001 in floating point
    assert noise_count(3, 0.5) == 2


def test_noise_instances_record_counts_order_and_ratio() -> None:
    item = load_rgb(DATA / "en_base.jsonl").items[0]  # 5 positives, 6 negatives
    for ratio, n_noise in ((0.0, 0), (0.2, 1), (0.4, 2), (0.6, 3), (0.8, 4)):
        inst = build_instance(item, "noise", ratio, BuildOptions(seed=3))
        assert (inst.n_noise, inst.n_positive, len(inst.docs)) == (n_noise, 5 - n_noise, 5)
        assert inst.noise_ratio_actual == pytest.approx(ratio)
        assert not inst.flags and inst.skipped is None
        # top of each pool, in pool order before the shuffle
        assert sorted(d.index for d in inst.docs if d.pool == "negative") == list(range(n_noise))
        assert all(d.text == item.negative[d.index] for d in inst.docs if d.pool == "negative")
    a = build_instance(item, "noise", 0.4, BuildOptions(seed=3))
    b = build_instance(item, "noise", 0.4, BuildOptions(seed=3))
    assert [d.text for d in a.docs] == [d.text for d in b.docs]  # seeded
    orders = {tuple(d.text for d in build_instance(item, "noise", 0.4, BuildOptions(seed=s)).docs) for s in range(8)}
    assert len(orders) > 1


def test_short_pools_are_flagged_then_padded_or_skipped() -> None:
    item = load_rgb(DATA / "en_base.jsonl").items[1]  # 2 positives, 5 negatives
    padded = build_instance(item, "noise", 0.0, BuildOptions(shortfall="pad"))
    assert (padded.n_positive, padded.n_noise) == (2, 3)
    assert padded.noise_ratio_actual == pytest.approx(0.6)
    assert any("pool too small" in f for f in padded.flags)
    assert any("actual noise ratio 0.6" in f for f in padded.flags)
    skipped = build_instance(item, "noise", 0.0, BuildOptions(shortfall="skip"))
    assert skipped.skipped and "pool too small" in skipped.skipped and not skipped.docs
    fine = build_instance(item, "noise", 0.6, BuildOptions(shortfall="skip"))
    assert fine.skipped is None and (fine.n_positive, fine.n_noise) == (2, 3)
    few_neg = load_rgb(DATA / "en_base.jsonl").items[2]  # 5 positives, 2 negatives
    neg = build_instance(few_neg, "negative", 1.0, BuildOptions(shortfall="pad"))
    assert (len(neg.docs), neg.n_noise) == (2, 2)  # never padded with positives
    assert any("2 documents instead of 5" in f for f in neg.flags)
    assert build_instance(few_neg, "negative", 1.0, BuildOptions(shortfall="skip")).skipped


def test_integration_takes_one_document_per_part_first() -> None:
    item = load_rgb(DATA / "en_int.jsonl").items[0]  # 2 groups of 2, 4 negatives
    inst = build_instance(item, "integration", 0.4, BuildOptions())
    groups = sorted(d.group for d in inst.docs if d.pool == "positive" and d.group is not None)
    assert groups == [0, 0, 1]
    low = build_instance(item, "integration", 0.8, BuildOptions(shortfall="pad"))
    assert {d.group for d in low.docs if d.pool == "positive"} == {0, 1}
    assert any("one document per answer part" in f for f in low.flags)
    assert build_instance(item, "integration", 0.8, BuildOptions(shortfall="skip")).skipped


def test_counterfactual_uses_corrupted_positives_and_optional_correct_ones() -> None:
    item = load_rgb(DATA / "en_fact.jsonl").items[0]
    inst = build_instance(item, "counterfactual", 0.0, BuildOptions(n_docs=2))
    assert {d.pool for d in inst.docs} == {"positive_wrong"}
    assert all("Lindmouth" in d.text for d in inst.docs)
    mixed = build_instance(item, "counterfactual", 0.0, BuildOptions(n_docs=2, correct_ratio=0.5))
    assert sorted(d.pool for d in mixed.docs) == ["positive", "positive_wrong"]
    assert {d.index for d in mixed.docs} == {0, 1}  # the true one is a different document
    closed = build_instance(item, "counterfactual", 0.0, BuildOptions(), condition="no_documents")
    assert closed.docs == [] and closed.noise_ratio_actual is None


def _pick(item: RGBItem, spec: list[str]) -> list[str]:
    """Documents named like 'p0', 'n2', 'w1', 'g1.0' (positive, negative, positive_wrong, group.index)."""
    out = []
    for s in spec:
        if s.startswith("g"):
            g, i = s[1:].split(".")
            out.append(item.positive_groups[int(g)][int(i)])
        else:
            pool = {"p": item.positive, "n": item.negative, "w": item.positive_wrong}[s[0]]
            out.append(pool[int(s[1:])])
    return out


@pytest.mark.parametrize(
    ("name", "index", "testbed", "ratio", "chosen", "actual"),
    [
        # hand-worked from the original rules (see build_rgb_instance)
        ("en_base", 0, "noise", 0.4, ["p0", "p1", "p2", "n0", "n1"], 0.4),
        ("en_base", 1, "noise", 0.0, ["p0", "p1", "n0", "n1", "n2"], 0.6),  # too few positives: noise pads
        ("en_base", 2, "noise", 0.6, ["p0", "p1", "p2", "n0", "n1"], 0.4),  # too few negatives: positives pad
        ("en_base", 2, "negative", 1.0, ["n0", "n1"], 1.0),  # ratio 1: fewer documents, never positives
        ("en_int", 0, "integration", 0.8, ["g0.*", "g1.*", "n0", "n1", "n2"], 0.6),  # one per group regardless
        ("en_int", 1, "integration", 0.0, ["g0.0", "g1.*", "g1.*", "n0", "n1"], 0.4),
        ("en_fact", 0, "counterfactual", 0.0, ["w0", "w1"], 0.0),  # no padding: 2 documents
        ("en_fact", 0, "counterfactual", 0.4, ["w*", "w*", "n0", "n1"], 0.5),
    ],
)
def test_rgb_construction_follows_the_original_rules(
    name: str, index: int, testbed: str, ratio: float, chosen: list[str], actual: float
) -> None:
    item = load_rgb(DATA / f"{name}.jsonl").items[index]
    inst = build_rgb_instance(item, testbed, ratio, 5)
    got = [d.text for d in inst.docs]
    exact = [c for c in chosen if "*" not in c]
    assert len(got) == len(chosen)
    assert set(_pick(item, exact)) <= set(got)
    for c in chosen:
        if "*" in c:  # any document of that pool / group (which one depends on the seeded shuffle)
            pool = item.positive_groups[int(c[1])] if c.startswith("g") else item.positive_wrong
            assert any(t in pool for t in got)
    assert inst.noise_ratio_actual == pytest.approx(actual)
    if abs(actual - (1.0 if testbed == "negative" else ratio)) > 1e-9 or len(got) != 5:
        assert any("original construction" in f for f in inst.flags)


def test_rgb_construction_order_is_the_seed_2333_shuffle() -> None:
    item = load_rgb(DATA / "en_base.jsonl").items[0]
    expected = _pick(item, ["p0", "p1", "p2", "n0", "n1"])
    random.Random(2333).shuffle(expected)
    assert [d.text for d in build_rgb_instance(item, "noise", 0.4, 5).docs] == expected


def test_parse_item_keeps_meta() -> None:
    it = parse_item({"id": "x", "query": "q", "answer": "a", "positive": ["a"], "negative": [], "meta": {"k": 1}}, "w")
    assert it.meta == {"k": 1} and it.to_record()["meta"] == {"k": 1}


def test_fewer_keeps_the_requested_ratio_with_fewer_documents() -> None:
    # issue 36.9: a corpus-built noise testbed padded short positive pools with noise, so ratio 0 held 0.36
    # noise on average and accuracy did not move with the ratio
    from ragrade.robust.build import fewer_noise

    assert [fewer_noise(2, 5, r) for r in (0.0, 0.2, 0.4, 0.6, 0.8)] == [0, 1, 1, 3, 5]  # by hand: m / (2 + m)
    assert fewer_noise(2, 1, 0.6) == 1  # at most the noise there is
    assert fewer_noise(1, 5, 0.25) == 0  # 0 and 1/2 are both 0.25 away: the fewer documents
    item = load_rgb(DATA / "en_base.jsonl").items[1]  # 2 positives, 5 negatives
    zero = build_instance(item, "noise", 0.0, BuildOptions(shortfall="fewer"))
    assert (zero.n_positive, zero.n_noise) == (2, 0) and zero.noise_ratio_actual == 0.0
    assert any("fewer documents: 2 positive and 0 noise" in f for f in zero.flags)
    assert any("2 documents instead of 5" in f for f in zero.flags)
    high = build_instance(item, "noise", 0.6, BuildOptions(shortfall="fewer"))  # not short: 2 + 3, as asked
    assert (high.n_positive, high.n_noise) == (2, 3) and not any("pool too small" in f for f in high.flags)
    some = build_instance(item, "noise", 0.2, BuildOptions(shortfall="fewer"))
    assert (some.n_positive, some.n_noise) == (2, 1)  # 1/3 is the share nearest 0.2 with 2 positives
