"""A-priori question filters: self-containment, intra- and extra-candidate similarity, near duplicates.

Each filter takes the questions that reached it and returns, per question,
either ``None`` (kept) or one reason, plus a record of the thresholds it used.
Similarity filters score questions with word n-gram Jaccard and embedding
cosine; their thresholds are fixed or set as a quantile of the scores so that
about a target share of questions is removed (:func:`quantile_thresholds`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.embedding.base import Embedder
from ragrade.errors import ConfigError
from ragrade.exam.config import FilterConfig
from ragrade.exam.text import jaccard, ngrams, words

FloatArray = npt.NDArray[np.float64]

_SOURCE_NOUNS_STRONG = (
    r"documentation|docs|passage|passages|excerpt|extract|snippet|article|paper|transcript|chunk|"
    r"author|authors|writer"
)
_SOURCE_NOUNS_WEAK = r"text|document|documents|context|section|paragraph|page|study|report|filing|abstract|source"
_DEICTIC = r"this|these|that|above|following|given|provided|preceding|aforementioned|accompanying|attached|same"

#: named regexes a self-contained question must not match (case-insensitive); extend with ``extra_patterns``
SELF_CONTAINMENT_PATTERNS: dict[str, str] = {
    # "the passage", "this article", "the above documentation"
    "points_at_source": rf"\b(?:the|{_DEICTIC})\s+(?:(?:{_DEICTIC}|original|source|provided)\s+)?"
    rf"(?:{_SOURCE_NOUNS_STRONG})\b",
    # "this text", "the given document", "the section above"
    "deictic_reference": rf"\b(?:{_DEICTIC})\s+(?:{_SOURCE_NOUNS_WEAK})\b"
    rf"|\bthe\s+(?:{_SOURCE_NOUNS_WEAK})\s+(?:above|below|provided|given)\b",
    # "according to the text", "mentioned in the document", "based on the information provided"
    "according_to": r"\b(?:according\s+to|based\s+on|mentioned\s+in|described\s+in|discussed\s+in|stated\s+in|"
    rf"outlined\s+in|presented\s+in|addressed\s+in|given\s+in)\s+the\s+(?:{_SOURCE_NOUNS_WEAK}|"
    r"information(?:\s+(?:provided|given|above))?)\b",
    # "as mentioned above", "as described earlier"
    "as_mentioned": r"\bas\s+(?:mentioned|described|stated|discussed|explained|shown|noted|outlined|seen)\s+"
    r"(?:above|below|earlier|previously|before)\b",
    # a quoted title after a source noun or citation verb: 'the paper "Attention is all you need"'
    "quoted_title": r"\b(?:documentation|document|paper|article|study|research|report|guide|book|chapter|post|"
    r"titled|entitled|called|discussed\s+in|described\s+in|addressed\s+in|presented\s+in|of\s+the)"
    r"\s*[:,]?\s*[\"“][^\"”]{3,}[\"”]",
}


@dataclass(frozen=True)
class FilterItem:
    """What the filters look at: question, candidates, the correct index, and the source chunk's text."""

    question: str
    choices: tuple[str, ...]
    answer: int
    context: str

    @property
    def correct(self) -> str:
        """The correct candidate."""
        return self.choices[self.answer]

    @property
    def distractors(self) -> list[str]:
        """The incorrect candidates."""
        return [c for i, c in enumerate(self.choices) if i != self.answer]


@dataclass
class FilterResult:
    """Per-item reasons (None = kept), scores and the thresholds used."""

    name: str
    reasons: list[str | None]
    thresholds: dict[str, Any]
    scores: dict[str, list[float | None]]

    @property
    def removed(self) -> int:
        """Number of removed items."""
        return sum(r is not None for r in self.reasons)


class SelfContainment:
    """Regex check that a question does not point at its source document or quote a title."""

    name = "self_containment"

    def __init__(self, extra_patterns: Sequence[str] = (), base: Mapping[str, str] | None = None) -> None:
        table = dict(SELF_CONTAINMENT_PATTERNS if base is None else base)
        for i, pat in enumerate(extra_patterns):
            table[f"custom_{i + 1}"] = pat
        self.patterns: dict[str, re.Pattern[str]] = {}
        for name, pat in table.items():
            try:
                self.patterns[name] = re.compile(pat, re.IGNORECASE)
            except re.error as exc:
                raise ConfigError(f"self-containment pattern {name!r} is not a valid regex: {exc}") from exc

    def check(self, text: str) -> str | None:
        """The name of the first pattern ``text`` matches, or None."""
        for name, pat in self.patterns.items():
            if pat.search(text):
                return name
        return None

    def __call__(self, items: Sequence[FilterItem]) -> FilterResult:
        """Check every item's question and candidates."""
        reasons: list[str | None] = []
        for it in items:
            hit = self.check(it.question) or next((h for c in it.choices if (h := self.check(c))), None)
            reasons.append(None if hit is None else f"{self.name}:{hit}")
        return FilterResult(self.name, reasons, {"patterns": sorted(self.patterns)}, {})


def _embed_rows(embedder: Embedder, texts: Sequence[str]) -> FloatArray:
    return np.asarray(embedder.embed(list(texts)), dtype=np.float64)


def mean_choice_words(item: FilterItem) -> int:
    """The n of the intra-candidate n-gram Jaccard: mean candidate length in words, rounded, at least 1."""
    return max(1, round(float(np.mean([len(words(c)) for c in item.choices]))))


def intra_scores(items: Sequence[FilterItem], embedder: Embedder) -> dict[str, FloatArray]:
    """Per item, the highest similarity between the correct answer and a distractor (Jaccard_n, cosine)."""
    jac = np.zeros(len(items))
    for i, it in enumerate(items):
        n = mean_choice_words(it)
        c = ngrams(words(it.correct), n)
        jac[i] = max(jaccard(c, ngrams(words(d), n)) for d in it.distractors)
    texts = [c for it in items for c in it.choices]
    vecs = _embed_rows(embedder, texts).reshape(len(items), 4, -1) if items else np.zeros((0, 4, 1))
    cos = np.zeros(len(items))
    for i, it in enumerate(items):
        v = vecs[i]
        sims = v @ v[it.answer]
        cos[i] = max(float(sims[j]) for j in range(4) if j != it.answer)
    return {"jaccard": jac, "cosine": cos}


def extra_scores(items: Sequence[FilterItem], embedder: Embedder) -> dict[str, FloatArray]:
    """Per item, how much closer the closest distractor is to the source chunk than the correct answer.

    ``max_i sim(chunk, distractor_i) - sim(chunk, correct)`` with word Jaccard and embedding cosine;
    positive means some distractor is closer to the source than the correct answer.
    """
    jac = np.zeros(len(items))
    for i, it in enumerate(items):
        k = set(words(it.context))
        c = jaccard(k, set(words(it.correct)))
        jac[i] = max(jaccard(k, set(words(d))) for d in it.distractors) - c
    cos = np.zeros(len(items))
    if items:
        ctx = _embed_rows(embedder, [it.context for it in items])
        ch = _embed_rows(embedder, [c for it in items for c in it.choices]).reshape(len(items), 4, -1)
        for i, it in enumerate(items):
            sims = ch[i] @ ctx[i]
            cos[i] = max(float(sims[j]) for j in range(4) if j != it.answer) - float(sims[it.answer])
    return {"jaccard": jac, "cosine": cos}


def quantile_thresholds(scores: Mapping[str, FloatArray], share: float) -> dict[str, float]:
    """Thresholds, one per metric, such that removing items above any of them removes about ``share``.

    All metrics share one quantile level ``p`` (the smallest for which at most
    ``round(share * n)`` items exceed a threshold), so no metric dominates.
    """
    names = list(scores)
    n = len(next(iter(scores.values()))) if scores else 0
    if n == 0:
        return {m: float("inf") for m in names}
    target = int(np.floor(share * n + 0.5))
    arrays = [np.asarray(scores[m], dtype=np.float64) for m in names]

    def at(p: float) -> list[float]:
        return [float(np.quantile(a, p, method="higher")) for a in arrays]

    def removed(ts: list[float]) -> int:
        mask = np.zeros(n, dtype=bool)
        for a, t in zip(arrays, ts, strict=True):
            mask |= a > t
        return int(mask.sum())

    lo, hi = 0.0, 1.0
    if removed(at(lo)) <= target:
        return dict(zip(names, at(lo), strict=True))
    for _ in range(50):
        mid = (lo + hi) / 2
        if removed(at(mid)) <= target:
            hi = mid
        else:
            lo = mid
    return dict(zip(names, at(hi), strict=True))


def apply_thresholds(name: str, scores: Mapping[str, FloatArray], cfg: FilterConfig) -> FilterResult:
    """Decide per item from ``scores`` (higher = worse) and the filter's threshold config."""
    n = len(next(iter(scores.values()))) if scores else 0
    if cfg.mode == "off":
        thresholds: dict[str, float | None] = {m: None for m in scores}
    elif cfg.mode == "quantile":
        thresholds = dict(quantile_thresholds(scores, cfg.share))
    else:
        thresholds = {"jaccard": cfg.jaccard, "cosine": cfg.cosine}
        thresholds = {m: thresholds.get(m) for m in scores}
    reasons: list[str | None] = []
    for i in range(n):
        hit = next((m for m in scores if thresholds[m] is not None and scores[m][i] > thresholds[m]), None)
        reasons.append(None if hit is None else f"{name}:{hit}")
    record: dict[str, Any] = {"mode": cfg.mode, "thresholds": {m: _round(t) for m, t in thresholds.items()}}
    if cfg.mode == "quantile":
        record["share"] = cfg.share
    return FilterResult(name, reasons, record, {m: [_round(float(x)) for x in v] for m, v in scores.items()})


def _round(x: float | None) -> float | None:
    if x is None or not np.isfinite(x):
        return None
    return round(float(x), 6)


def intra_candidate(items: Sequence[FilterItem], embedder: Embedder, cfg: FilterConfig) -> FilterResult:
    """Remove questions whose distractor nearly repeats the correct answer."""
    if cfg.mode == "off" or not items:
        return apply_thresholds("intra_candidate", {"jaccard": np.zeros(len(items))}, FilterConfig(mode="off"))
    return apply_thresholds("intra_candidate", intra_scores(items, embedder), cfg)


def extra_candidate(items: Sequence[FilterItem], embedder: Embedder, cfg: FilterConfig) -> FilterResult:
    """Remove questions with a distractor closer to the source chunk than the correct answer."""
    if cfg.mode == "off" or not items:
        return apply_thresholds("extra_candidate", {"jaccard": np.zeros(len(items))}, FilterConfig(mode="off"))
    return apply_thresholds("extra_candidate", extra_scores(items, embedder), cfg)


def near_duplicates(items: Sequence[FilterItem], embedder: Embedder, cfg: FilterConfig) -> FilterResult:
    """Remove a question too close (embedding cosine of question + answer) to an earlier kept question.

    Exact repeats (same question text and candidates) are always removed.
    """
    name = "near_duplicate"
    n = len(items)
    if n == 0:
        return FilterResult(name, [], {"mode": cfg.mode, "thresholds": {"cosine": None}}, {"cosine": []})
    texts = [f"{it.question}\n{it.correct}" for it in items]
    vecs = _embed_rows(embedder, texts)
    sims = vecs @ vecs.T
    np.fill_diagonal(sims, -1.0)
    earlier = np.array([sims[i, :i].max() if i else -1.0 for i in range(n)])
    if cfg.mode == "quantile":
        threshold: float | None = quantile_thresholds({"cosine": earlier}, cfg.share)["cosine"]
    elif cfg.mode == "fixed":
        threshold = cfg.cosine
    else:
        threshold = None
    keys = [(it.question.strip().casefold(), tuple(sorted(c.casefold() for c in it.choices))) for it in items]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    kept: list[int] = []
    reasons: list[str | None] = []
    for i in range(n):
        if keys[i] in seen:
            reasons.append(f"{name}:exact")
            continue
        if threshold is not None and kept and float(sims[i, kept].max()) > threshold:
            reasons.append(f"{name}:cosine")
            continue
        seen.add(keys[i])
        kept.append(i)
        reasons.append(None)
    record: dict[str, Any] = {"mode": cfg.mode, "thresholds": {"cosine": _round(threshold)}}
    if cfg.mode == "quantile":
        record["share"] = cfg.share
    return FilterResult(name, reasons, record, {"cosine": [_round(float(x)) for x in earlier]})


__all__ = [
    "SELF_CONTAINMENT_PATTERNS",
    "FilterItem",
    "FilterResult",
    "SelfContainment",
    "apply_thresholds",
    "extra_candidate",
    "extra_scores",
    "intra_candidate",
    "intra_scores",
    "mean_choice_words",
    "near_duplicates",
    "quantile_thresholds",
]
