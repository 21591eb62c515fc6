"""Chunkers: token, recursive, sentence and semantic.

Sizes are counted in **tokens of one tokenizer**, by default the word-piece
tokenizer of the bundled all-MiniLM-L6-v2 model, for all four strategies
(see :mod:`ragrade.corpus.tokens`). ``size`` is the most tokens a chunk may
hold; ``overlap`` the most tokens two consecutive chunks share.

Guarantees of every chunker, for every document:

* ``doc.text[chunk.start:chunk.end] == chunk.text`` and the text is non-empty
  and has no leading or trailing whitespace;
* chunks come in document order (starts and ends strictly increase) and
  together cover every non-whitespace character (only whitespace between
  chunks is left out);
* a chunk holds at most ``size`` tokens, except a chunk made of a single
  tokenizer word longer than ``size``, which is marked ``oversize``;
* a fragment under ``min_size`` tokens (a lone heading, an admonition marker)
  is merged into its next (else previous) neighbour when the result fits in
  ``size``; the effective minimum is at most ``size // 4``.

Structure (``recursive``, ``sentence`` and ``semantic``; see :mod:`ragrade.corpus.structure`):

* a fenced code block that fits in ``size`` is never split; a larger one is
  split at line ends, and its parts record ``fence_open`` / ``fence_close``
  (:meth:`~ragrade.corpus.types.Chunk.display_text` reopens and closes the fence);
* a ``#`` heading line stays with the text it heads (a chunk ends on a heading
  only when another heading follows it, or a code block that fits in a chunk
  only without the heading);
* every chunk records ``heading_path`` (document title > section > ...) at its start.

Strategies:

* ``token``: windows of up to ``size`` tokens, cut between tokenizer words (structure ignored);
* ``recursive``: split on paragraphs, then lines, sentences, words until the
  pieces fit, then merge neighbouring pieces up to ``size``;
* ``sentence``: whole sentences (rule-based segmenter, CJK ends included)
  packed up to ``size``; a sentence is cut only when it alone exceeds ``size``;
* ``semantic``: breakpoints where the embedding distance between consecutive
  sentences exceeds a percentile of the document's distances; groups larger
  than ``size`` are packed by sentences (see :mod:`ragrade.corpus.semantic`).

Chunk ids are ``<doc id>#<strategy>-<hash of strategy and parameters>-<n>``,
so they are stable for equal input and unique across strategies and parameters.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from ragrade.corpus.spans import Span, merge, pieces_at, recursive_spans, split_to_fit, structural_pieces, trimmed
from ragrade.corpus.structure import chunk_metadata, parse_structure
from ragrade.corpus.tokens import DEFAULT_TOKENIZER, TokenCounter, TokenIndex, get_counter
from ragrade.corpus.types import Chunk, Document
from ragrade.errors import ConfigError, DataError
from ragrade.io import JSONObject
from ragrade.registry import create, names, register

DEFAULT_SIZE = 200
DEFAULT_OVERLAP = 20
DEFAULT_MIN_SIZE = 10
STRATEGIES = ("token", "recursive", "sentence", "semantic")


@runtime_checkable
class Chunker(Protocol):
    """Splits documents into chunks."""

    strategy: str
    size: int
    overlap: int

    def chunk(self, doc: Document) -> list[Chunk]:
        """The chunks of ``doc`` in document order."""
        ...

    def describe(self) -> JSONObject:
        """Strategy and parameters, for file headers and run manifests."""
        ...


def params_hash(strategy: str, params: Mapping[str, object]) -> str:
    """A short hash of a strategy and its parameters (part of every chunk id)."""
    blob = json.dumps({"strategy": strategy, **params}, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:8]


class BaseChunker:
    """Common parts: validation, tokenisation, chunk records. Subclasses implement :meth:`spans`."""

    strategy: ClassVar[str] = ""
    options: ClassVar[tuple[str, ...]] = ("size", "overlap", "tokenizer", "min_size")

    def __init__(
        self,
        size: int = DEFAULT_SIZE,
        overlap: int = DEFAULT_OVERLAP,
        tokenizer: str = DEFAULT_TOKENIZER,
        min_size: int = DEFAULT_MIN_SIZE,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"chunk size must be a positive whole number of tokens, got {size!r}")
        if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 0:
            raise ConfigError(f"chunk overlap must be zero or a positive whole number, got {overlap!r}")
        if overlap >= size:
            raise ConfigError(f"the overlap ({overlap}) must be smaller than the size ({size})")
        if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 0:
            raise ConfigError(f"the minimum chunk size must be zero or a positive whole number, got {min_size!r}")
        self.min_size = min_size
        self.size = size
        self.overlap = overlap
        self.tokenizer = tokenizer
        self._counter: TokenCounter | None = None
        self._params_cache: tuple[JSONObject, str] | None = None

    @property
    def counter(self) -> TokenCounter:
        """The token counter (loaded on first use)."""
        if self._counter is None:
            self._counter = get_counter(self.tokenizer)
        return self._counter

    def params(self) -> JSONObject:
        """Parameters recorded on every chunk."""
        return {
            "size": self.size,
            "overlap": self.overlap,
            "unit": "tokens",
            "tokenizer": self.tokenizer,
            "min_size": self.min_size,
        }

    def describe(self) -> JSONObject:
        """Strategy and parameters."""
        params = self.params()
        return {"strategy": self.strategy, **params, "params_hash": params_hash(self.strategy, params)}

    def spans(self, index: TokenIndex) -> list[Span]:
        """Chunk spans ``(start, end, tokens)`` of one tokenised document."""
        raise NotImplementedError

    def chunk(self, doc: Document) -> list[Chunk]:
        """The chunks of ``doc``."""
        return self.chunk_many([doc])[0]

    def chunk_many(self, docs: Sequence[Document]) -> list[list[Chunk]]:
        """The chunks of each of ``docs`` (tokenised as one batch)."""
        indexes = self.counter.index_many([d.text for d in docs])
        return [self._records(doc, self.merge_small(ix, self.spans(ix))) for doc, ix in zip(docs, indexes, strict=True)]

    def merge_small(self, index: TokenIndex, spans: list[Span]) -> list[Span]:
        """Merge each span under the minimum size into its next (else previous) neighbour when that fits."""
        floor = min(self.min_size, self.size // 4)
        out = list(spans)
        i = 0
        while i < len(out) and len(out) > 1:
            if out[i][2] >= floor:
                i += 1
                continue
            for j in (i + 1, i - 1):
                if 0 <= j < len(out):
                    a, b = min(i, j), max(i, j)
                    s, e = out[a][0], out[b][1]
                    n = index.count(s, e)
                    if n <= self.size:
                        out[a : b + 1] = [(s, e, n)]
                        i = a
                        break
            else:
                i += 1
        return out

    def _records(self, doc: Document, spans: list[Span]) -> list[Chunk]:
        if self._params_cache is None:
            params = self.params()
            self._params_cache = (params, params_hash(self.strategy, params))
        params, phash = self._params_cache
        prefix = f"{doc.id}#{self.strategy}-{phash}"
        struct = parse_structure(doc.text)
        title = doc.metadata.get("title")
        title = str(title) if title else None
        return [
            Chunk(
                id=f"{prefix}-{i}",
                doc_id=doc.id,
                text=doc.text[s:e],
                start=s,
                end=e,
                strategy=self.strategy,
                params=dict(params),
                source=doc.source,
                metadata={**doc.metadata, **chunk_metadata(struct, s, e, title)},
                tokens=n,
                oversize=n > self.size,
            )
            for i, (s, e, n) in enumerate(spans)
        ]


class TokenChunker(BaseChunker):
    """Windows of up to ``size`` tokens with up to ``overlap`` tokens shared, cut between words."""

    strategy = "token"

    def spans(self, index: TokenIndex) -> list[Span]:
        """Token windows."""
        whole = trimmed(index.text)
        if whole is None:
            return []
        return merge(pieces_at(index, whole[0], whole[1], "token"), index, self.size, self.overlap)


class RecursiveChunker(BaseChunker):
    """Separator hierarchy paragraph > line > sentence > word > token, then merge up to size."""

    strategy = "recursive"

    def spans(self, index: TokenIndex) -> list[Span]:
        """Recursive splits."""
        whole = trimmed(index.text)
        if whole is None:
            return []
        n = index.count(*whole)
        if n <= self.size:
            return [(whole[0], whole[1], n)]
        return recursive_spans(index, whole[0], whole[1], self.size, self.overlap, struct=parse_structure(index.text))


class SentenceChunker(BaseChunker):
    """Whole sentences packed up to ``size``; overlap repeats trailing whole sentences."""

    strategy = "sentence"

    def spans(self, index: TokenIndex) -> list[Span]:
        """Sentence packs."""
        whole = trimmed(index.text)
        if whole is None:
            return []
        return merge(sentence_pieces(index, whole[0], whole[1], self.size), index, self.size, self.overlap)


def sentence_pieces(index: TokenIndex, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """Sentences of ``[start, end)``; a sentence over ``size`` tokens is split at words (then tokens).

    Structure first: a fenced code block is one piece when it fits (else its lines are), a heading
    line is a piece of its own, and only the text between them is cut into sentences.
    """
    out: list[tuple[int, int]] = []
    for a, b, kind in structural_pieces(index, start, end, parse_structure(index.text)):
        if kind != "text":
            fits = index.count(a, b) <= size
            out.extend([(a, b)] if fits else split_to_fit(index, a, b, size, level=1))
            continue
        for s, e in pieces_at(index, a, b, "sentence"):
            if index.count(s, e) <= size:
                out.append((s, e))
            else:
                out.extend(split_to_fit(index, s, e, size, level=3))
    return out


def _checked(cls_name: str, options: Iterable[str], extra: Mapping[str, object]) -> None:
    if extra:
        raise ConfigError(
            f"the {cls_name} chunker does not take {', '.join(sorted(extra))}; it takes: {', '.join(options)}"
        )


@register("chunker", "token")
def _make_token(
    size: int = DEFAULT_SIZE,
    overlap: int = DEFAULT_OVERLAP,
    tokenizer: str = DEFAULT_TOKENIZER,
    min_size: int = DEFAULT_MIN_SIZE,
    **extra: object,
) -> TokenChunker:
    _checked("token", TokenChunker.options, extra)
    return TokenChunker(size, overlap, tokenizer, min_size)


@register("chunker", "recursive")
def _make_recursive(
    size: int = DEFAULT_SIZE,
    overlap: int = DEFAULT_OVERLAP,
    tokenizer: str = DEFAULT_TOKENIZER,
    min_size: int = DEFAULT_MIN_SIZE,
    **extra: object,
) -> RecursiveChunker:
    _checked("recursive", RecursiveChunker.options, extra)
    return RecursiveChunker(size, overlap, tokenizer, min_size)


@register("chunker", "sentence")
def _make_sentence(
    size: int = DEFAULT_SIZE,
    overlap: int = DEFAULT_OVERLAP,
    tokenizer: str = DEFAULT_TOKENIZER,
    min_size: int = DEFAULT_MIN_SIZE,
    **extra: object,
) -> SentenceChunker:
    _checked("sentence", SentenceChunker.options, extra)
    return SentenceChunker(size, overlap, tokenizer, min_size)


def create_chunker(strategy: str, size: int = DEFAULT_SIZE, overlap: int = DEFAULT_OVERLAP, **kw: object) -> Chunker:
    """Build the chunker registered as ``strategy`` (token, recursive, sentence, semantic).

    ``kw`` are strategy options: ``tokenizer`` and ``min_size`` for all; ``embedder``, ``threshold``
    and ``buffer`` for semantic. Unknown strategies and options raise ConfigError.
    """
    chunker: Chunker = create("chunker", strategy, size=size, overlap=overlap, **kw)
    return chunker


def strategies() -> list[str]:
    """Names of the registered chunkers."""
    return names("chunker")


def chunk_documents(
    docs: Sequence[Document], chunker: Chunker, *, batch_size: int = 256, progress: Callable[[int], None] | None = None
) -> list[Chunk]:
    """Chunk ``docs`` in order; ``progress`` is called with the number of documents done per batch.

    With ``progress``, batches are small enough (about 1/50 of the documents, at least 8) for the
    count to advance with the work, also for the semantic chunker, which embeds a batch at once.
    """
    out: list[Chunk] = []
    many = getattr(chunker, "chunk_many", None)
    step = batch_size if progress is None else max(1, min(batch_size, max(8, -(-len(docs) // 50))))
    for lo in range(0, len(docs), step):
        batch = docs[lo : lo + step]
        if many is not None:
            for chunks in many(batch):
                out.extend(chunks)
        else:
            for doc in batch:
                out.extend(chunker.chunk(doc))
        if progress is not None:
            progress(len(batch))
    ids = {c.id for c in out}
    if len(ids) != len(out):
        raise DataError("chunk ids are not unique: two input documents share an id")
    return out


def summarize_chunks(chunks: Sequence[Chunk], n_docs: int | None = None) -> dict[str, Any]:
    """Counts and length statistics (tokens and characters) of ``chunks``."""
    toks = [c.tokens for c in chunks]
    chars = [len(c.text) for c in chunks]
    with_chunks = len({c.doc_id for c in chunks})

    def _stats(values: list[int]) -> dict[str, float | int]:
        if not values:
            return {"mean": 0.0, "median": 0.0, "min": 0, "max": 0}
        return {
            "mean": round(statistics.fmean(values), 2),
            "median": float(statistics.median(values)),
            "min": min(values),
            "max": max(values),
        }

    summary: JSONObject = {
        "chunks": len(chunks),
        "documents_with_chunks": with_chunks,
        "tokens": _stats(toks),
        "chars": _stats(chars),
        "oversize": sum(1 for c in chunks if c.oversize),
    }
    if n_docs is not None:
        summary["documents"] = n_docs
        summary["documents_without_chunks"] = n_docs - with_chunks
    return summary


__all__ = [
    "DEFAULT_MIN_SIZE",
    "DEFAULT_OVERLAP",
    "DEFAULT_SIZE",
    "STRATEGIES",
    "BaseChunker",
    "Chunker",
    "RecursiveChunker",
    "SentenceChunker",
    "TokenChunker",
    "chunk_documents",
    "create_chunker",
    "params_hash",
    "sentence_pieces",
    "strategies",
    "summarize_chunks",
]
