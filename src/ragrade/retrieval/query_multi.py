"""``multi-query``: the LLM writes N rephrasings of the query; the original and the rephrasings are all
retrieved with and their hit lists fused by reciprocal rank (RRF, constant 60).

Rephrasings are parsed one per line (numbering and bullets removed, duplicates
and copies of the original dropped). A failed reply, or one with no usable
line, falls back to the original query alone and is reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.retrieval.transforms import QUERY_KIND, QueryPlan, ask_llm, failure, transform

if TYPE_CHECKING:
    from ragrade.llm.base import LLM

SYSTEM = "You help a search engine by rephrasing search queries."
USER = (
    "Write {n} different ways of asking the search query below, each using other words or naming the "
    "concept differently, so that together they find every passage that answers it. One per line, no "
    "numbering, nothing else.\n\nQuery: {question}"
)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]+|\(?\d{1,2}[.):])\s*")


def parse_rephrasings(text: str, original: str, n: int) -> list[str]:
    """Up to ``n`` distinct rephrasings from a reply, one per line."""
    out: list[str] = []
    seen = {original.strip().lower()}
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip().strip('"').strip()
        if len(line) < 3 or line.lower() in seen:
            continue
        seen.add(line.lower())
        out.append(line)
    return out[:n]


class MultiQuery:
    """Retrieve with the query and N LLM rephrasings, fused by RRF."""

    name = "multi-query"

    def __init__(self, llm: LLM, n: int = 3, max_tokens: int = 200) -> None:
        if n <= 0 or max_tokens <= 0:
            raise ConfigError("multi-query n and max_tokens must be positive")
        self.llm = llm
        self.n = int(n)
        self.max_tokens = int(max_tokens)

    async def transform(self, queries: Sequence[str]) -> list[QueryPlan]:
        """One plan per query: the original first, then the rephrasings.

        Written once per batch of queries, LLM and settings in a process (shared by every pipeline using them).
        """
        from ragrade.retrieval.query_memo import hashable, shared_call

        key = (self.name, hashable(self.llm), self.n, self.max_tokens, tuple(queries))
        return await shared_call(key, lambda: self._transform(queries))

    async def _transform(self, queries: Sequence[str]) -> list[QueryPlan]:
        prompts = [(SYSTEM, USER.replace("{n}", str(self.n)).replace("{question}", q)) for q in queries]
        comps = await ask_llm(self.llm, prompts, task="multi-query", max_tokens=self.max_tokens, questions=queries)
        plans = []
        for q, c in zip(queries, comps, strict=True):
            alts = parse_rephrasings(c.text or "", q, self.n) if c.ok else []
            if alts:
                plans.append(QueryPlan(q, [q, *alts]))
            elif c.ok and (c.text or "").strip():
                plans.append(
                    QueryPlan(q, [q], error="multi-query failed (no rephrasing in the reply); used the original")
                )
            else:
                plans.append(QueryPlan(q, [q], error=failure(self.name, c)))
        return plans

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "name": self.name,
            "llm": str(getattr(self.llm, "name", "llm")),
            "n": self.n,
            "fusion": "rrf",
            "rrf_k": 60,
            "max_tokens": self.max_tokens,
        }


@transform(QUERY_KIND, "multi-query", needs_llm=True)
def _multi(*, llm: Any, index: Any = None, **kw: Any) -> MultiQuery:
    return MultiQuery(llm, **kw)
