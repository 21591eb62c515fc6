"""``hyde``: the LLM writes a hypothetical passage answering the query; the passage is what gets retrieved with.

Hypothetical document embeddings: a question and its answer passage are often
far apart in embedding space (and share few words); a passage written to answer
the question lies near the real one. The passage replaces the query for every
retriever (dense embeds it, BM25 matches its words); ``keep_query = true``
also searches with the original query and fuses both by reciprocal rank.
A failed or empty reply falls back to the original query and is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.retrieval.transforms import QUERY_KIND, QueryPlan, ask_llm, failure, transform

if TYPE_CHECKING:
    from ragrade.llm.base import LLM

SYSTEM = "You write short, factual passages in the style of technical documentation."
USER = (
    "Write one passage of two to four sentences that answers the question below, as it might appear in the "
    "documentation that covers it. Write only the passage, without a title or any remark about the question.\n\n"
    "Question: {question}\nPassage:"
)


class HyDE:
    """Retrieve with an LLM-written hypothetical answer passage."""

    name = "hyde"

    def __init__(self, llm: LLM, max_tokens: int = 160, keep_query: bool = False) -> None:
        if max_tokens <= 0:
            raise ConfigError("hyde max_tokens must be positive")
        self.llm = llm
        self.max_tokens = int(max_tokens)
        self.keep_query = bool(keep_query)

    async def transform(self, queries: Sequence[str]) -> list[QueryPlan]:
        """One plan per query: the passage (and the query with ``keep_query``), or the query on failure.

        Written once per batch of queries, LLM and settings in a process (shared by every pipeline using them).
        """
        from ragrade.retrieval.query_memo import hashable, shared_call

        key = (self.name, hashable(self.llm), self.max_tokens, self.keep_query, tuple(queries))
        return await shared_call(key, lambda: self._transform(queries))

    async def _transform(self, queries: Sequence[str]) -> list[QueryPlan]:
        prompts = [(SYSTEM, USER.replace("{question}", q)) for q in queries]
        comps = await ask_llm(self.llm, prompts, task="hyde", max_tokens=self.max_tokens, questions=queries)
        plans = []
        for q, c in zip(queries, comps, strict=True):
            text = (c.text or "").strip() if c.ok else ""
            if not text:
                plans.append(QueryPlan(q, [q], error=failure(self.name, c)))
            else:
                plans.append(QueryPlan(q, [text, q] if self.keep_query else [text]))
        return plans

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "name": self.name,
            "llm": str(getattr(self.llm, "name", "llm")),
            "max_tokens": self.max_tokens,
            "keep_query": self.keep_query,
        }


@transform(QUERY_KIND, "hyde", needs_llm=True)
def _hyde(*, llm: Any, index: Any = None, **kw: Any) -> HyDE:
    return HyDE(llm, **kw)
