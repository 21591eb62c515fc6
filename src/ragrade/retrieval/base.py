"""The Retriever protocol, the Hit record and what a retriever declares when it is registered.

A retriever registers with :func:`register_retriever` (or plain ``@register("retriever", NAME)``, which
declares the defaults) and states its :class:`RetrieverCaps`: whether it searches an index, whether its
``k`` is fixed, whether it is handed the gold passages. Code that must treat a retriever specially asks
:func:`retriever_caps`, never the retriever's name. (The Embedder protocol is :mod:`ragrade.embedding.base`.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragrade.io import JSONObject
from ragrade.registry import lookup, names, register

F = TypeVar("F", bound=Callable[..., Any])
RETRIEVER_KIND = "retriever"


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk for one query (rank starts at 1)."""

    chunk_id: str
    doc_id: str
    score: float
    rank: int
    text: str
    source: str = ""
    # character offsets into the chunk's text of the parts ``text`` keeps (set by extractive compression)
    spans: tuple[tuple[int, int], ...] | None = None


@runtime_checkable
class Retriever(Protocol):
    """Retrieves the top-k chunks for a batch of queries."""

    name: str

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """One ranked hit list (at most ``k`` hits) per query, in query order."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        ...


@runtime_checkable
class GoldRetriever(Protocol):
    """A retriever registered with ``needs_gold=True``: each call is handed the gold passages of its queries."""

    name: str

    def retrieve(
        self, queries: Sequence[str], k: int, *, gold: Sequence[Sequence[Hit]] | None = None
    ) -> list[list[Hit]]:
        """One ranked hit list per query; ``gold`` holds per query its gold passages (chunk id, doc id, text)."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        ...


@dataclass(frozen=True)
class RetrieverCaps:
    """What a registered retriever declares about itself (the defaults: an ordinary retriever over an index).

    ``needs_index``: False for one that searches no index (closed book, the oracle): a pipeline with it has no
    chunker, no query transform and no post-processing, and runs without ``--index``; its factory gets
    ``index=None``. ``fixed_k``: the one ``k`` that makes sense for it (closed book: 0, k is meaningless; the
    oracle: 1), set on every pipeline with it; ``0`` also means it never returns a passage. ``needs_gold``: it
    is handed each query's gold passages (``retrieve(queries, k, gold=...)``, see :class:`GoldRetriever`): in a
    pipeline the question's source passage, in a retrieval evaluation the first ``k`` relevant chunks.
    """

    needs_index: bool = True
    fixed_k: int | None = None
    needs_gold: bool = False

    @property
    def retrieves(self) -> bool:
        """False for a retriever that never returns a passage (``fixed_k == 0``: closed book)."""
        return self.fixed_k != 0


def register_retriever(
    name: str, *, needs_index: bool = True, fixed_k: int | None = None, needs_gold: bool = False
) -> Callable[[F], F]:
    """Register a retriever factory as ``name`` (kind ``retriever``), declaring its :class:`RetrieverCaps`."""
    if fixed_k is not None and (isinstance(fixed_k, bool) or not isinstance(fixed_k, int) or fixed_k < 0):
        raise ValueError(f"retriever '{name}': fixed_k must be a non-negative integer or None, got {fixed_k!r}")
    caps = RetrieverCaps(needs_index=needs_index, fixed_k=fixed_k, needs_gold=needs_gold)

    def deco(factory: F) -> F:
        factory.retriever_caps = caps  # type: ignore[attr-defined]
        return register(RETRIEVER_KIND, name)(factory)

    return deco


def retriever_caps(spec: str) -> RetrieverCaps:
    """The capabilities of retriever ``spec`` (a name, or ``rerank(<base>)``: the outer name's).

    A name that is not registered (an external system, a plugin not loaded now, a typo) gets the defaults:
    the error for an unknown name is raised where the retriever is built, with its did-you-mean.
    """
    name = spec.split("(", 1)[0].strip()
    if name not in names(RETRIEVER_KIND):
        return RetrieverCaps()
    caps = getattr(lookup(RETRIEVER_KIND, name), "retriever_caps", None)
    return caps if isinstance(caps, RetrieverCaps) else RetrieverCaps()


__all__ = [
    "RETRIEVER_KIND",
    "GoldRetriever",
    "Hit",
    "Retriever",
    "RetrieverCaps",
    "register_retriever",
    "retriever_caps",
]
