"""``llm-rerank``: pointwise LLM relevance scores (0-10) for every candidate, all pairs sent in one batch.

Each (question, passage) pair gets its own short request, so requests cache and
parallelise independently. The first number in a reply is the score. When any
candidate of a query gets no score (a failed request or an unreadable reply),
that query keeps the retriever's order and the failure is reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ragrade.io import JSONObject
from ragrade.retrieval.base import Hit
from ragrade.retrieval.transforms import POST_KIND, Processed, ask_per_passage, transform

if TYPE_CHECKING:
    from ragrade.llm.base import LLM

SYSTEM = "You judge whether passages help answer questions. You reply with a single number."
USER = (
    "How useful is the passage for answering the question? Reply with one number from 0 (useless) to 10 "
    "(answers it directly), and nothing else.\n\nQuestion: {question}\n\nPassage:\n{passage}\n\nScore:"
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_score(text: str | None) -> float | None:
    """The first number of a reply, clipped to 0..10; None when there is none."""
    m = _NUMBER.search(text or "")
    return None if m is None else min(10.0, max(0.0, float(m.group())))


class LLMRerank:
    """Pointwise LLM relevance re-ranking."""

    name = "llm-rerank"

    def __init__(self, llm: LLM, max_tokens: int = 8) -> None:
        self.llm = llm
        self.max_tokens = int(max_tokens)

    async def process(self, queries: Sequence[str], hits: list[list[Hit]], k: int) -> Processed:
        """Each list sorted by LLM score (the new ``score``); ties keep the incoming order."""
        comps = await ask_per_passage(
            self.llm, SYSTEM, USER, queries, hits, task="llm-rerank", max_tokens=self.max_tokens
        )
        out: list[list[Hit]] = []
        errors: list[str | None] = []
        at = 0
        for hl in hits:
            mine = comps[at : at + len(hl)]
            at += len(hl)
            scores = [parse_score(c.text) if c.ok else None for c in mine]
            missing = [i for i, s in enumerate(scores) if s is None]
            if missing:
                first = mine[missing[0]]
                why = first.error or f"unreadable reply {str(first.text)[:40]!r}"
                out.append(list(hl))
                errors.append(f"llm-rerank failed for {len(missing)} of {len(hl)} passages ({why}); kept the order")
                continue
            order = sorted(range(len(hl)), key=lambda i: (-float(scores[i] or 0.0), i))
            out.append([replace(hl[i], score=float(scores[i] or 0.0)) for i in order])
            errors.append(None)
        return out, errors

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"name": self.name, "llm": str(getattr(self.llm, "name", "llm")), "scale": "0-10", "pointwise": True}


@transform(POST_KIND, "llm-rerank", needs_llm=True)
def _llm_rerank(*, llm: Any, index: Any = None, **kw: Any) -> LLMRerank:
    return LLMRerank(llm, **kw)
