"""Claim-level diagnosis metrics from entailment verdicts (shared by the LLM judge and the offline baseline).

Notation for one answer: ``A`` the answer's claims, ``G`` the reference
answer's claims, ``P_1..P_k`` the retrieved passages. ``a |= X`` means claim
``a`` is entailed by text ``X``. A passage is *relevant* when it entails at
least one reference claim. An answer claim is *correct* when the reference
entails it.

==========================  ===================================================================
metric                      formula
==========================  ===================================================================
precision                   |{a in A : a correct}| / |A|
recall                      |{g in G : answer |= g}| / |G|
f1                          2 * precision * recall / (precision + recall)
claim_recall (retriever)    |{g in G : some P_j |= g}| / |G|
context_precision           |{P_j : P_j relevant}| / k
context_utilisation         |{g in G : some P_j |= g and answer |= g}| / |{g in G : some P_j |= g}|
noise_relevant              |{a in A : a not correct and some relevant P_j |= a}| / |A|
noise_irrelevant            |{a in A : a not correct, some irrelevant P_j |= a, no relevant P_j |= a}| / |A|
hallucination               |{a in A : a not correct and no P_j |= a}| / |A|
self_knowledge              |{a in A : a correct and no P_j |= a}| / |A|
faithfulness                |{a in A : some P_j |= a}| / |A|
==========================  ===================================================================

These are RAGChecker's definitions (Ru et al., 2024), the metric names aside.
An incorrect claim entailed by a relevant and by an irrelevant passage is
relevant noise only, so ``noise_relevant + noise_irrelevant + hallucination =
1 - precision`` (the incorrect claims, split by where they came from) and
``faithfulness + hallucination + self_knowledge = 1``.

Where RAGChecker writes 0 for a metric whose denominator or terms do not exist,
the value here is None (undefined, left out of the means):

* no answer claims: precision, noise sensitivity, hallucination, self-knowledge
  and faithfulness (and f1, unless the answer abstains, see below);
* no reference claims: recall, f1, claim_recall, context_utilisation, and also
  context_precision and noise sensitivity when there are passages (no passage
  can be shown relevant or irrelevant);
* no passages: context_precision; no reference claim found in the passages:
  context_utilisation.

Closed book (no passages) is our choice too, where RAGChecker writes 0: nothing
came from a passage, so every incorrect claim is a hallucination, every correct
one self-knowledge, noise sensitivity and faithfulness are 0 and claim_recall
is 0.

Verdicts are 1 (entailed), 0 (not) or None (the judge's verdict was unparsed).
Conditions combine with three-valued logic (``1 or None`` is 1, ``0 or None``
is unknown): a claim whose condition stays unknown is left out of that
metric's numerator and denominator and counted in ``undetermined``. An
unparsed verdict is never turned into a number.

An answer that abstains (declines to answer, :mod:`ragrade.judge.abstain`) has
no claims: the metrics over ``A`` (precision, noise sensitivity,
hallucination, self-knowledge, faithfulness) are undefined (None, left out of
the means), recall is 0, F1 is 0 (whatever the precision, 2PR/(P+R) = 0
when R = 0) and the retriever metrics are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

Verdict = float | None  # 1.0, 0.0 or None (unknown)

METRICS = (
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
#: which part of a RAG pipeline each metric speaks for
COMPONENT = {
    "precision": "overall",
    "recall": "overall",
    "f1": "overall",
    "claim_recall": "retriever",
    "context_precision": "retriever",
    "context_utilisation": "generator",
    "noise_relevant": "generator",
    "noise_irrelevant": "generator",
    "hallucination": "generator",
    "self_knowledge": "generator",
    "faithfulness": "generator",
}


def k_or(values: Iterable[Verdict]) -> Verdict:
    """Three-valued OR: 1 if any is 1, 0 if all are 0, else unknown."""
    unknown = False
    for v in values:
        if v == 1.0:
            return 1.0
        if v is None:
            unknown = True
    return None if unknown else 0.0


def k_and(*values: Verdict) -> Verdict:
    """Three-valued AND: 0 if any is 0, 1 if all are 1, else unknown."""
    if any(v == 0.0 for v in values):
        return 0.0
    if any(v is None for v in values):
        return None
    return 1.0


def k_not(value: Verdict) -> Verdict:
    """Three-valued NOT."""
    return None if value is None else 1.0 - value


def _share(values: Sequence[Verdict]) -> tuple[float | None, int]:
    known = [v for v in values if v is not None]
    return (sum(known) / len(known) if known else None), len(values) - len(known)


def _answer_side(
    put: Callable[[str, Sequence[Verdict]], None],
    answer_vs_reference: Sequence[Verdict],
    answer_vs_passages: Sequence[Sequence[Verdict]],
    relevant: Sequence[Verdict] | None,
) -> None:
    """The metrics over the answer's claims (``relevant``: per passage; None: undefined, no reference claims)."""
    n_pass = len(answer_vs_passages)
    rows = []
    for i, correct in enumerate(answer_vs_reference):
        by_passage = [answer_vs_passages[j][i] for j in range(n_pass)]
        rel = relevant if relevant is not None else [0.0] * n_pass  # the noise metrics are skipped then
        in_rel = k_or(k_and(r, v) for r, v in zip(rel, by_passage, strict=True))
        in_irr = k_or(k_and(k_not(r), v) for r, v in zip(rel, by_passage, strict=True))
        rows.append((k_not(correct), in_rel, in_irr, k_or(by_passage)))
    put("precision", answer_vs_reference)
    if relevant is not None or n_pass == 0:
        put("noise_relevant", [k_and(wrong, in_rel) for wrong, in_rel, _, _ in rows])
        # irrelevant noise only where no relevant passage entails the claim: the parts stay disjoint
        put("noise_irrelevant", [k_and(wrong, in_irr, k_not(in_rel)) for wrong, in_rel, in_irr, _ in rows])
    put("hallucination", [k_and(wrong, k_not(any_p)) for wrong, _, _, any_p in rows])
    put("self_knowledge", [k_and(k_not(wrong), k_not(any_p)) for wrong, _, _, any_p in rows])
    put("faithfulness", [any_p for _, _, _, any_p in rows])


def claim_metrics(
    answer_vs_reference: Sequence[Verdict] | None,
    reference_vs_answer: Sequence[Verdict] | None,
    answer_vs_passages: Sequence[Sequence[Verdict]] | None,
    reference_vs_passages: Sequence[Sequence[Verdict]] | None,
) -> dict[str, Any]:
    """Every metric of one answer, with ``undetermined`` counts; None where a side is unknown or undefined.

    ``answer_vs_reference[i]``: answer claim i entailed by the reference;
    ``reference_vs_answer[k]``: reference claim k entailed by the answer;
    ``answer_vs_passages[j][i]`` and ``reference_vs_passages[j][k]``: by passage j.
    A side is None when its claims could not be extracted.
    """
    values: dict[str, float | None] = dict.fromkeys(METRICS)
    undetermined: dict[str, int] = {}

    def put(name: str, verdicts: Sequence[Verdict]) -> None:
        values[name], undetermined[name] = _share(verdicts)

    n_pass = len(answer_vs_passages if answer_vs_passages is not None else reference_vs_passages or [])
    relevant: list[Verdict] | None = [None] * n_pass  # unknown when the reference's claims are
    if reference_vs_answer is not None and reference_vs_passages is not None:
        n_ref = len(reference_vs_answer)
        in_ctx = [k_or(reference_vs_passages[j][k] for j in range(n_pass)) for k in range(n_ref)]
        put("recall", reference_vs_answer)
        put("claim_recall", in_ctx)
        put("context_utilisation", [reference_vs_answer[k] for k in range(n_ref) if in_ctx[k] == 1.0])
        undetermined["context_utilisation"] += sum(1 for v in in_ctx if v is None)
        # with no reference claim no passage can be shown relevant or not: undefined (RAGChecker: 0)
        relevant = [k_or(reference_vs_passages[j]) for j in range(n_pass)] if n_ref else None
        if relevant is not None:
            put("context_precision", relevant)
    if answer_vs_reference is not None and answer_vs_passages is not None:
        _answer_side(put, answer_vs_reference, answer_vs_passages, relevant)
    p, r = values["precision"], values["recall"]
    if p is not None and r is not None:
        values["f1"] = 0.0 if p + r == 0 else 2 * p * r / (p + r)

    return {"values": values, "undetermined": {k: v for k, v in undetermined.items() if v}}


__all__ = ["COMPONENT", "METRICS", "claim_metrics", "k_and", "k_not", "k_or"]
