"""The judge stage: scoring free-text answers with LLM judges, BERTScore and lexical metrics.

Importing this package registers the judges (kind ``judge``): ``correctness``,
``faithfulness``, ``relevancy``, ``claims``, ``bertscore``, ``exact``. Heavy models load
only when a judge is created.
"""

from __future__ import annotations

from ragrade.judge import judges as _judges  # noqa: F401  (registers the judges)

LLM_METRICS = ("correctness", "faithfulness", "relevancy", "claims")
CHEAP_METRICS = ("bertscore", "exact")
METRICS = (*LLM_METRICS, *CHEAP_METRICS)

__all__ = ["CHEAP_METRICS", "LLM_METRICS", "METRICS"]
