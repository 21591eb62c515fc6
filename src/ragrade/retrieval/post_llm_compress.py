"""``llm-compress``: the LLM condenses each passage to what helps answer the question (abstractive).

One request per passage, batched; the hit keeps its chunk id (so gold-chunk
hit rates still count it) and its text becomes the summary. A reply of
``NONE`` drops the passage. A failed request keeps the original passage and
reports the failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ragrade.io import JSONObject
from ragrade.retrieval.base import Hit
from ragrade.retrieval.transforms import POST_KIND, Processed, ask_per_passage, transform

if TYPE_CHECKING:
    from ragrade.llm.base import LLM

SYSTEM = "You condense passages for a question-answering system without adding anything."
USER = (
    "Rewrite the passage below keeping only the facts that help answer the question, in at most three "
    "sentences, using the passage's own words where you can. If nothing in it helps, reply NONE.\n\n"
    "Question: {question}\n\nPassage:\n{passage}\n\nCondensed passage:"
)


class LLMCompress:
    """Abstractive, query-focused compression of each passage."""

    name = "llm-compress"

    def __init__(self, llm: LLM, max_tokens: int = 160) -> None:
        self.llm = llm
        self.max_tokens = int(max_tokens)

    async def process(self, queries: Sequence[str], hits: list[list[Hit]], k: int) -> Processed:
        """Each hit's text condensed (dropped on NONE; kept as it was when its request failed)."""
        comps = await ask_per_passage(
            self.llm, SYSTEM, USER, queries, hits, task="llm-compress", max_tokens=self.max_tokens
        )
        out: list[list[Hit]] = []
        errors: list[str | None] = []
        at = 0
        for hl in hits:
            kept: list[Hit] = []
            failed = 0
            why = ""
            for h, c in zip(hl, comps[at : at + len(hl)], strict=True):
                text = (c.text or "").strip() if c.ok else ""
                if not text:
                    failed += 1
                    why = why or str(c.error or "empty reply")[:120]
                    kept.append(h)
                elif text.strip(" .").upper() != "NONE":
                    kept.append(replace(h, text=text, spans=None))
            at += len(hl)
            out.append(kept)
            errors.append(
                f"llm-compress failed for {failed} of {len(hl)} passages ({why}); kept them" if failed else None
            )
        return out, errors

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"name": self.name, "llm": str(getattr(self.llm, "name", "llm")), "max_tokens": self.max_tokens}


@transform(POST_KIND, "llm-compress", needs_llm=True)
def _llm_compress(*, llm: Any, index: Any = None, **kw: Any) -> LLMCompress:
    return LLMCompress(llm, **kw)
