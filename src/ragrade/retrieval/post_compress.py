"""``compress``: extractive compression; each passage keeps the sentences most similar to the query
that fit in a budget of ``budget`` whitespace tokens, in their original order.

The compressed hit keeps its chunk id and records ``spans``: the character
offsets of the kept sentences in the chunk's text (``chunk.text[start:end]``
is exactly each kept sentence), so citations still point into the chunk. The
text given to the LLM is the kept sentences joined by `` ... ``. When even the
best sentence is over budget, its first ``budget`` tokens are kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.retrieval.base import Hit
from ragrade.retrieval.transforms import POST_KIND, Processed, Similarity, transform

_TOKEN = re.compile(r"\S+")
JOINER = " ... "


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence (split at ``.!?`` before whitespace and at line breaks), trimmed."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in re.finditer(r"(?<=[.!?])\s+|\n+", text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    out = []
    for s, e in spans:
        seg = text[s:e]
        lead = len(seg) - len(seg.lstrip())
        trail = len(seg) - len(seg.rstrip())
        if e - trail > s + lead:
            out.append((s + lead, e - trail))
    return out


def n_tokens(text: str) -> int:
    """Whitespace tokens of ``text`` (the budget's unit)."""
    return len(_TOKEN.findall(text))


def _cut(text: str, start: int, end: int, budget: int) -> tuple[int, int]:
    """The span of the first ``budget`` tokens of ``text[start:end]``."""
    toks = list(_TOKEN.finditer(text, start, end))[:budget]
    return (start, toks[-1].end()) if toks else (start, start)


def select_spans(
    text: str, sims: Sequence[float], spans: Sequence[tuple[int, int]], budget: int
) -> list[tuple[int, int]]:
    """Greedy by similarity (ties by position): every sentence that still fits; in text order."""
    order = sorted(range(len(spans)), key=lambda i: (-float(sims[i]), i))
    kept: list[int] = []
    used = 0
    for i in order:
        n = n_tokens(text[spans[i][0] : spans[i][1]])
        if used + n <= budget:
            kept.append(i)
            used += n
    if not kept and order:
        s, e = spans[order[0]]
        return [_cut(text, s, e, budget)]
    return [spans[i] for i in sorted(kept)]


class Compress:
    """Extractive, query-focused sentence selection within a token budget per passage."""

    name = "compress"

    def __init__(self, sim: Similarity, budget: int = 60) -> None:
        if budget <= 0:
            raise ConfigError(f"compress budget must be positive, got {budget}")
        self.sim = sim
        self.budget = int(budget)

    def compress(self, query: str, hit: Hit, sims: Sequence[float] | None = None) -> Hit:
        """``hit`` reduced to its selected sentences (unchanged when it already fits).

        ``sims``: the similarity of each sentence of :func:`sentence_spans` to the query, when known.
        """
        base = hit.text
        if n_tokens(base) <= self.budget:
            return replace(hit, spans=((0, len(base)),) if hit.spans is None else hit.spans)
        spans = sentence_spans(base)
        if sims is None:
            sims = list(self.sim.to_query(query, [base[s:e] for s, e in spans]))
        kept = select_spans(base, list(sims), spans, self.budget)
        offsets = tuple(kept)
        if hit.spans is not None:  # compressing compressed text: map back into the chunk
            offsets = tuple(_map_back(hit, s, e) for s, e in kept)
        return replace(hit, text=JOINER.join(base[s:e] for s, e in kept), spans=offsets)

    async def process(self, queries: Sequence[str], hits: list[list[Hit]], k: int) -> Processed:
        """Every hit compressed (order unchanged)."""
        if self.sim.embedder is None:
            return [[self.compress(q, h) for h in hl] for q, hl in zip(queries, hits, strict=True)], [None] * len(hits)
        texts = list(queries)  # every sentence of every passage over budget, embedded in one call
        where: dict[tuple[int, int], int] = {}
        for qi, hl in enumerate(hits):
            for hi, h in enumerate(hl):
                if n_tokens(h.text) > self.budget:
                    where[(qi, hi)] = len(texts)
                    texts += [h.text[s:e] for s, e in sentence_spans(h.text)]
        unique = list(dict.fromkeys(texts))  # a chunk retrieved for several queries is embedded once
        first = {t: i for i, t in enumerate(unique)}
        vecs = self.sim.vectors(unique)[[first[t] for t in texts]]
        out = []
        for qi, (q, hl) in enumerate(zip(queries, hits, strict=True)):
            row = []
            for hi, h in enumerate(hl):
                at = where.get((qi, hi))
                n = len(sentence_spans(h.text)) if at is not None else 0
                sims = list(vecs[at : at + n] @ vecs[qi]) if at is not None else None
                row.append(self.compress(q, h, sims))
            out.append(row)
        return out, [None] * len(hits)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "name": self.name,
            "budget": self.budget,
            "unit": "whitespace tokens",
            "similarity": self.sim.kind,
        }


def _map_back(hit: Hit, start: int, end: int) -> tuple[int, int]:
    """Chunk offsets of ``hit.text[start:end]`` when ``hit.text`` is its spans joined by JOINER."""
    at = 0
    for s, e in hit.spans or ():
        length = e - s
        if at <= start <= at + length:
            return s + (start - at), s + min(end - at, length)
        at += length + len(JOINER)
    return start, end


@transform(POST_KIND, "compress")
def _compress(*, index: object = None, llm: object = None, embedder: object = None, **kw: Any) -> Compress:
    return Compress(Similarity(index, embedder), **kw)
