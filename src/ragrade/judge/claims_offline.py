"""The offline claims baseline (``--metrics claims --llm offline/judge``): no LLM, labelled a baseline everywhere.

Claims are the sentences of a text. A claim counts as entailed by a text when

    0.5 * cosine(claim, best sentence of the text) + 0.5 * lexical recall >= threshold (0.6)

where the cosine is between bundled MiniLM embeddings and the lexical recall is
the share of the claim's content words (stopwords removed) that occur in the
text. It sees paraphrase and word overlap, not negation or numbers: a
reference point that lets the whole path run offline, not a judge to trust.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragrade.io import JSONObject
from ragrade.judge.claims import ABSTENTION_RULE, ClaimsConfig, ClaimsJudge, _Job
from ragrade.judge.inputs import AnswerItem
from ragrade.llm.offline import content, sentences, words

VERSION = 1
METHOD = "offline baseline: sentence claims; entailment = 0.5 MiniLM cosine + 0.5 lexical recall >= threshold"


def lexical_recall(claim: str, premise: str) -> float:
    """Share of the claim's content words found in the premise (1.0 for a claim without content words)."""
    want = set(content(words(claim)))
    if not want:
        return 1.0
    return len(want & set(words(premise))) / len(want)


class OfflineClaimsJudge(ClaimsJudge):
    """Claims by sentence splitting; entailment by MiniLM similarity and lexical overlap (a baseline)."""

    uses_llm = False
    baseline = True

    def __init__(self, config: ClaimsConfig | None = None, *, threshold: float = 0.6, semantic: bool = True) -> None:
        super().__init__(None, config)
        self.threshold = threshold
        self.semantic = semantic

    def describe(self) -> JSONObject:
        """Method and threshold; ``baseline`` is True."""
        return {
            "metric": self.name,
            "kind": "claims",
            "llm_name": "offline/judge",
            "baseline": True,
            "method": METHOD,
            "threshold": self.threshold,
            "semantic": self.semantic,
            "version": VERSION,
        }

    def fingerprint(self) -> str:
        """Method version, threshold and the similarity used."""
        key = ("offline-claims", VERSION, ABSTENTION_RULE, self.threshold, self.semantic, self.config.max_context_chars)
        return hashlib.sha256(repr(key).encode()).hexdigest()[:12]

    async def ascore(self, items: Sequence[AnswerItem]) -> list[dict[str, Any]]:
        """Records as the LLM judge's, each marked ``baseline``."""
        return [{**rec, "baseline": True} for rec in await super().ascore(items)]

    async def _run_extract(self, jobs: Sequence[_Job]) -> list[dict[str, Any]]:
        return [{"status": "ok", "claims": sentences(j.text), "method": "baseline"} for j in jobs]

    def entailment(self, claims: Sequence[str], premise: str) -> list[float]:
        """The baseline's entailment score of every claim against ``premise``."""
        premise = premise[: self.config.max_context_chars]
        lex = np.array([lexical_recall(c, premise) for c in claims])
        if not self.semantic:
            return [float(v) for v in lex]
        from ragrade.llm.offline import _EMBED

        sents = sentences(premise) or [premise]
        cv = _EMBED(list(claims)).astype(np.float64)
        pv = _EMBED(sents).astype(np.float64)
        cv /= np.linalg.norm(cv, axis=1, keepdims=True) + 1e-12
        pv /= np.linalg.norm(pv, axis=1, keepdims=True) + 1e-12
        cos = (cv @ pv.T).max(axis=1)
        return [float(v) for v in 0.5 * cos + 0.5 * lex]

    async def _run_check(self, jobs: Sequence[_Job]) -> list[dict[str, Any]]:
        if self.semantic and jobs:  # one embedding batch for the whole batch of checks (memoised)
            from ragrade.llm.offline import _EMBED

            texts = {
                t
                for j in jobs
                for t in [*(j.claims or []), *(sentences(j.text[: self.config.max_context_chars]) or [j.text])]
            }
            _EMBED(sorted(texts))
        out = []
        for job in jobs:
            assert job.claims is not None
            scores = self.entailment(job.claims, job.text) if job.text.strip() else [0.0] * len(job.claims)
            out.append(
                {
                    "status": "ok",
                    "verdicts": [1.0 if s >= self.threshold else 0.0 for s in scores],
                    "similarity": [round(s, 4) for s in scores],
                    "n_claims": len(job.claims),
                    "method": "baseline",
                }
            )
        return out


__all__ = ["METHOD", "OfflineClaimsJudge", "lexical_recall"]
