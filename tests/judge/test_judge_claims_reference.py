"""Claim metrics against RAGChecker's definitions (Ru et al., 2024) on verdict matrices.

The literal expected values below were computed by RAGChecker 0.1.9
(``ragchecker.computation``, installed in a throwaway venv, not needed here).
The random-matrix tests compare with an independent re-derivation from the
set definitions in :mod:`ragrade.judge.claims_metrics`, with ragrade's
conventions where RAGChecker writes 0 for an undefined value (None here) and
for closed book (no passages).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from ragrade.judge.claims_metrics import METRICS, Verdict, claim_metrics

# answer vs reference, reference vs answer, answer vs passages, reference vs passages
Case = tuple[list[Verdict], list[Verdict], list[list[Verdict]], list[list[Verdict]]]

ORDER = (
    "precision",
    "recall",
    "f1",
    "claim_recall",
    "context_precision",
    "context_utilisation",
    "noise_relevant",
    "noise_irrelevant",
    "hallucination",
    "self_knowledge",
    "faithfulness",
)
# (answer claim correct, reference claim in the answer, passage j -> answer claims, passage j -> reference claims,
#  RAGChecker's 11 metrics in ORDER); the first five hold an incorrect claim entailed by a relevant and by an
# irrelevant passage, which the old rule counted under both noise_relevant and noise_irrelevant
RAGCHECKER_CASES = [
    (
        [0, 1, 0, 0],
        [0, 1],
        [[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
        [[1, 1], [0, 1], [1, 0], [0, 0]],
        [0.25, 0.5, 0.333333333333, 1.0, 0.75, 0.5, 0.5, 0.25, 0.0, 0.0, 1.0],
    ),
    (
        [1, 0, 0, 0, 0],
        [1],
        [[0, 0, 1, 1, 0], [0, 1, 1, 0, 1], [1, 1, 1, 0, 0], [1, 1, 0, 1, 1]],
        [[0], [0], [0], [1]],
        [0.2, 1.0, 0.333333333333, 1.0, 0.25, 1.0, 0.6, 0.2, 0.0, 0.0, 1.0],
    ),
    (
        [1, 0, 0, 1, 0],
        [1, 1, 0, 0],
        [[1, 1, 1, 0, 0], [1, 0, 1, 0, 1]],
        [[0, 0, 0, 0], [1, 1, 1, 0]],
        [0.4, 0.5, 0.444444444444, 0.75, 0.5, 0.666666666667, 0.4, 0.2, 0.0, 0.2, 0.8],
    ),
    (
        [0, 1, 0],
        [0, 0, 1, 1],
        [[0, 0, 0], [1, 1, 1], [1, 0, 1]],
        [[0, 0, 1, 0], [0, 1, 0, 1], [0, 0, 0, 0]],
        [0.333333333333, 0.5, 0.4, 0.75, 0.666666666667, 0.666666666667, 0.666666666667, 0.0, 0.0, 0.0, 1.0],
    ),
    (
        [0, 0],
        [1, 1, 0],
        [[1, 0], [1, 0], [1, 0]],
        [[0, 1, 0], [1, 1, 0], [0, 0, 0]],
        [0.0, 0.666666666667, 0.0, 0.666666666667, 0.666666666667, 1.0, 0.5, 0.0, 0.5, 0.0, 0.5],
    ),
    (
        [0, 0],
        [0, 1, 0],
        [[0, 0], [0, 0], [1, 0]],
        [[1, 1, 0], [1, 0, 1], [0, 0, 0]],
        [0.0, 0.333333333333, 0.0, 1.0, 0.666666666667, 0.333333333333, 0.0, 0.5, 0.5, 0.0, 0.5],
    ),
    (
        [0, 1, 0, 0],
        [1, 0],
        [[0, 1, 0, 0], [0, 1, 1, 1], [0, 1, 1, 0]],
        [[1, 1], [0, 0], [0, 0]],
        [0.25, 0.5, 0.333333333333, 1.0, 0.333333333333, 0.5, 0.0, 0.5, 0.25, 0.0, 0.75],
    ),
    (
        [0, 1, 1],
        [0, 1, 0],
        [[0, 1, 1], [0, 0, 0]],
        [[1, 1, 0], [1, 0, 1]],
        [
            0.666666666667,
            0.333333333333,
            0.444444444444,
            1.0,
            1.0,
            0.333333333333,
            0.0,
            0.0,
            0.333333333333,
            0.0,
            0.666666666667,
        ],
    ),
]


def _f(xs: Sequence[float | int]) -> list[float]:
    return [float(x) for x in xs]


@pytest.mark.parametrize("case", range(len(RAGCHECKER_CASES)))
def test_equals_ragchecker_values(case: int) -> None:
    avr, rva, avp, rvp, expected = RAGCHECKER_CASES[case]
    got = claim_metrics(_f(avr), _f(rva), [_f(r) for r in avp], [_f(r) for r in rvp])["values"]
    assert [got[m] for m in ORDER] == pytest.approx(expected, abs=1e-9)


def test_an_incorrect_claim_from_both_kinds_of_passage_is_relevant_noise_only() -> None:
    # one incorrect answer claim; P1 entails the reference claim (relevant) and the answer claim, P2 (irrelevant)
    # entails the answer claim too. The old rule gave noise_relevant = noise_irrelevant = 1: their sum, 2,
    # exceeded the share of incorrect claims (1 - precision = 1); RAGChecker counts it under relevant noise only.
    v = claim_metrics([0.0], [1.0], [[1.0], [1.0]], [[1.0], [0.0]])["values"]
    assert (v["noise_relevant"], v["noise_irrelevant"], v["hallucination"], v["precision"]) == (1.0, 0.0, 0.0, 0.0)
    assert v["context_precision"] == 0.5
    # the same claim from the irrelevant passage alone is irrelevant noise
    v = claim_metrics([0.0], [1.0], [[0.0], [1.0]], [[1.0], [0.0]])["values"]
    assert (v["noise_relevant"], v["noise_irrelevant"]) == (0.0, 1.0)


def _rederive(
    avr: Sequence[Verdict], rva: Sequence[Verdict], avp: Sequence[Sequence[Verdict]], rvp: Sequence[Sequence[Verdict]]
) -> dict[str, float | None]:
    """The definitions as set operations on boolean matrices (claims x passages), None where undefined."""
    correct, in_answer = np.array(avr, bool), np.array(rva, bool)
    na, ng, k = len(avr), len(rva), len(avp)
    a_p = np.array(avp, bool).reshape(k, na).T  # answer claim i entailed by passage j
    g_p = np.array(rvp, bool).reshape(k, ng).T
    relevant = g_p.any(axis=0)
    faithful = a_p.any(axis=1)
    from_rel = (a_p & relevant).any(axis=1)
    from_irr = (a_p & ~relevant).any(axis=1)
    found = g_p.any(axis=1)

    def share(mask: npt.NDArray[np.bool_] | np.bool_, n: int) -> float | None:
        return float(mask.sum()) / n if n else None

    out: dict[str, float | None] = {
        "precision": share(correct, na),
        "recall": share(in_answer, ng),
        "claim_recall": share(found, ng),
        "context_precision": share(relevant, k) if ng else None,
        "context_utilisation": share(found & in_answer, int(found.sum())),
        "noise_relevant": share(~correct & from_rel, na) if ng or not k else None,
        "noise_irrelevant": share(~correct & ~from_rel & from_irr, na) if ng or not k else None,
        "hallucination": share(~correct & ~faithful, na),
        "self_knowledge": share(correct & ~faithful, na),
        "faithfulness": share(faithful, na),
    }
    p, r = out["precision"], out["recall"]
    out["f1"] = None if p is None or r is None else (0.0 if p + r == 0 else 2 * p * r / (p + r))
    return out


def _random_case(rng: random.Random, unknown: float = 0.0) -> Case:
    na, ng, k = rng.randint(0, 5), rng.randint(0, 5), rng.randint(0, 4)
    p, q = rng.random(), rng.random()

    def verdict(prob: float) -> float | None:
        return None if rng.random() < unknown else float(rng.random() < prob)

    return (
        [verdict(p) for _ in range(na)],
        [verdict(p) for _ in range(ng)],
        [[verdict(q) for _ in range(na)] for _ in range(k)],
        [[verdict(q) for _ in range(ng)] for _ in range(k)],
    )


def test_random_matrices_match_the_definitions_and_partition_the_claims() -> None:
    rng = random.Random(2025)
    partitioned = 0
    for _ in range(3000):
        case = _random_case(rng)
        got = claim_metrics(*case)
        assert got["undetermined"] == {}
        v = got["values"]
        expected = _rederive(*case)
        for m in METRICS:
            assert (v[m] is None) == (expected[m] is None), (m, case)
            if v[m] is not None:
                assert v[m] == pytest.approx(expected[m], abs=1e-12), (m, case)
        if v["precision"] is not None:
            # every answer claim is correct or incorrect, from a passage or not
            assert v["faithfulness"] + v["hallucination"] + v["self_knowledge"] == pytest.approx(1.0)
            if v["noise_relevant"] is not None:
                parts = v["noise_relevant"] + v["noise_irrelevant"] + v["hallucination"]
                assert parts == pytest.approx(1.0 - v["precision"], abs=1e-12), case
                partitioned += 1
    assert partitioned > 1500  # the partition was checked on most matrices, not vacuously


def test_unknown_verdicts_never_decide_a_value_they_could_change() -> None:
    """A metric reported with no undetermined claim has that value whatever the unparsed verdicts were."""
    rng = random.Random(11)
    checked = 0
    for _ in range(400):
        case = _random_case(rng, unknown=0.15)
        flat = [case[0], case[1], *case[2], *case[3]]
        holes = [(row, i) for row in flat for i, x in enumerate(row) if x is None]
        if not holes or len(holes) > 4:
            continue
        got = claim_metrics(*case)
        settled = [m for m in METRICS if got["values"][m] is not None and m not in got["undetermined"]]
        settled = [m for m in settled if m != "f1" or not {"precision", "recall"} & set(got["undetermined"])]
        for fill in itertools.product((0.0, 1.0), repeat=len(holes)):
            for (row, i), x in zip(holes, fill, strict=True):
                row[i] = x
            full = claim_metrics(*case)["values"]
            for m in settled:
                assert full[m] == pytest.approx(got["values"][m]), (m, case)
                checked += 1
        for row, i in holes:
            row[i] = None
    assert checked > 1000


def test_undefined_values_are_none_where_ragchecker_writes_zero() -> None:
    # no answer claims: the metrics over A are undefined
    v = claim_metrics([], [1.0], [[], []], [[1.0], [0.0]])["values"]
    assert all(v[m] is None for m in ("precision", "noise_relevant", "noise_irrelevant", "hallucination"))
    assert (v["self_knowledge"], v["faithfulness"], v["f1"]) == (None, None, None)
    assert (v["recall"], v["claim_recall"], v["context_precision"]) == (1.0, 1.0, 0.5)
    # no reference claims, two passages: no passage can be shown relevant, so no context precision or noise split
    v = claim_metrics([0.0, 1.0], [], [[1.0, 0.0], [0.0, 0.0]], [[], []])["values"]
    assert all(v[m] is None for m in ("recall", "f1", "claim_recall", "context_precision", "context_utilisation"))
    assert v["noise_relevant"] is None and v["noise_irrelevant"] is None
    assert (v["precision"], v["hallucination"], v["self_knowledge"], v["faithfulness"]) == (0.5, 0.0, 0.5, 0.5)
    # closed book: every incorrect claim a hallucination, every correct one self-knowledge, no noise
    v = claim_metrics([1.0, 0.0, 0.0], [1.0, 0.0], [], [])["values"]
    assert v["hallucination"] == pytest.approx(2 / 3) and v["self_knowledge"] == pytest.approx(1 / 3)
    assert (v["noise_relevant"], v["noise_irrelevant"], v["faithfulness"], v["claim_recall"]) == (0.0, 0.0, 0.0, 0.0)
    assert v["context_precision"] is None and v["context_utilisation"] is None
    # reference claims found in no passage: context utilisation undefined
    v = claim_metrics([1.0], [1.0], [[0.0]], [[0.0]])["values"]
    assert v["context_utilisation"] is None and v["context_precision"] == 0.0
