"""Cheap reference metrics: exact match and token F1 with SQuAD-style normalisation.

Normalisation (as in the SQuAD v1.1 evaluation script): lower-case, drop
punctuation, drop the articles ``a``/``an``/``the``, collapse whitespace.
With several references, each metric takes the best reference.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    """Whitespace tokens of the normalised text."""
    return normalize_answer(text).split()


def exact_match(prediction: str, reference: str) -> int:
    """1 when the normalised prediction equals the normalised reference, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(reference))


def token_f1(prediction: str, reference: str) -> float:
    """Harmonic mean of token precision and recall over the bag of normalised tokens.

    Two empty texts score 1.0; one empty text scores 0.0 (SQuAD v2 convention).
    """
    pred = answer_tokens(prediction)
    ref = answer_tokens(reference)
    if not pred or not ref:
        return float(pred == ref)
    common = Counter(pred) & Counter(ref)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred)
    recall = overlap / len(ref)
    return 2 * precision * recall / (precision + recall)


def best_over_references(prediction: str, references: Sequence[str]) -> tuple[int, float]:
    """``(exact match, token F1)``, each the maximum over ``references``."""
    if not references:
        raise ValueError("at least one reference is needed")
    em = max(exact_match(prediction, r) for r in references)
    f1 = max(token_f1(prediction, r) for r in references)
    return em, f1


__all__ = ["answer_tokens", "best_over_references", "exact_match", "normalize_answer", "token_f1"]
