"""Token counting for chunk sizes, with character offsets.

Every chunker measures size in tokens of one tokenizer, by default the
word-piece tokenizer of the bundled all-MiniLM-L6-v2 embedding model (the
model truncates its input at 256 word pieces, so a chunk of at most ~200
tokens is embedded whole). Any Hugging Face ``tokenizer.json`` can be used
instead (``tokenizer="/path/to/tokenizer.json"`` or a model folder).

A document is tokenised once; :class:`TokenIndex` keeps the tokenizer's
*words* (the pre-tokenizer's units: a run of letters/digits or one
punctuation mark for BERT) with their character spans and token counts.
Chunk boundaries are only placed between words, so the token count of a
chunk's text encoded on its own equals the number of tokens of the words it
contains (exact for BERT-style tokenizers; byte-level BPE tokenizers may
differ by a token at the edges).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.errors import ConfigError
from ragrade.io import JSONObject

DEFAULT_TOKENIZER = "minilm"
IntArray = npt.NDArray[np.int64]


class TokenIndex:
    """The tokenizer words of one text: character spans and cumulative token counts."""

    __slots__ = ("cum", "ends", "starts", "text")

    def __init__(self, text: str, starts: IntArray, ends: IntArray, ntok: IntArray) -> None:
        self.text = text
        self.starts = starts
        self.ends = ends
        # cum[i] = tokens of words 0..i-1
        self.cum = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(ntok, dtype=np.int64)])

    @property
    def n_words(self) -> int:
        """Number of tokenizer words."""
        return len(self.starts)

    @property
    def n_tokens(self) -> int:
        """Number of tokens of the whole text."""
        return int(self.cum[-1])

    def count(self, start: int, end: int) -> int:
        """Tokens of the words that begin in ``[start, end)``."""
        i = int(np.searchsorted(self.starts, start, side="left"))
        j = int(np.searchsorted(self.starts, end, side="left"))
        return int(self.cum[j] - self.cum[i]) if j > i else 0

    def words_in(self, start: int, end: int) -> tuple[int, int]:
        """Index range ``[i, j)`` of the words that begin in ``[start, end)``."""
        i = int(np.searchsorted(self.starts, start, side="left"))
        j = int(np.searchsorted(self.starts, end, side="left"))
        return i, j

    def snap(self, positions: Sequence[int] | IntArray) -> IntArray:
        """Move each position that falls strictly inside a word to that word's end."""
        pos = np.asarray(positions, dtype=np.int64)
        if not self.n_words or not len(pos):
            return pos
        k = np.searchsorted(self.starts, pos, side="right") - 1
        valid = k >= 0
        kk = np.where(valid, k, 0)
        inside = valid & (self.starts[kk] < pos) & (pos < self.ends[kk])
        return np.where(inside, self.ends[kk], pos)


class TokenCounter:
    """A Hugging Face ``tokenizers`` tokenizer used only to count tokens with offsets."""

    def __init__(self, spec: str = DEFAULT_TOKENIZER) -> None:
        from tokenizers import Tokenizer

        self.spec = spec
        path = _tokenizer_file(spec)
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the tokenizers library raises plain Exceptions
            raise ConfigError(f"cannot load tokenizer {spec!r} from {path}: {exc}") from exc
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self.name = spec if spec == DEFAULT_TOKENIZER else Path(spec).name

    def index(self, text: str) -> TokenIndex:
        """The :class:`TokenIndex` of ``text``."""
        return self.index_many([text])[0]

    def index_many(self, texts: Sequence[str]) -> list[TokenIndex]:
        """Token indexes of ``texts`` (batch-encoded)."""
        encodings = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return [_build_index(text, enc) for text, enc in zip(texts, encodings, strict=True)]

    def count(self, text: str) -> int:
        """Tokens of ``text`` encoded on its own."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each of ``texts`` encoded on its own."""
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def describe(self) -> JSONObject:
        """Arguments for manifests."""
        return {"tokenizer": self.name}


def _build_index(text: str, enc: Any) -> TokenIndex:
    n = len(enc.ids)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return TokenIndex(text, empty, empty, empty)
    offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(n, 2)
    wid = np.asarray([-1 if w is None else w for w in enc.word_ids], dtype=np.int64)
    # a new word begins where the word id changes (special tokens, id None, are words of their own)
    new = np.ones(n, dtype=bool)
    new[1:] = (wid[1:] != wid[:-1]) | (wid[1:] < 0)
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:] - 1, [n - 1]])
    starts = offsets[first, 0]
    ends = np.maximum.reduceat(offsets[:, 1], first)
    ntok = last - first + 1
    # tokenizers give zero-width offsets to some tokens; keep spans ordered and non-empty
    order_ok = bool(np.all(np.diff(starts) >= 0))
    if not order_ok:  # pragma: no cover - defensive, not seen with BERT/BPE tokenizers
        idx = np.argsort(starts, kind="stable")
        starts, ends, ntok = starts[idx], ends[idx], ntok[idx]
    ends = np.maximum(ends, starts)
    return TokenIndex(text, starts.astype(np.int64), ends.astype(np.int64), ntok.astype(np.int64))


def _tokenizer_file(spec: str) -> Path:
    if spec == DEFAULT_TOKENIZER:
        from ragrade.embedding.embed import minilm_path

        return Path(minilm_path()) / "tokenizer.json"
    path = Path(os.path.expanduser(spec))
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(
            f"tokenizer {spec!r} not found: give '{DEFAULT_TOKENIZER}' or a path to a tokenizer.json "
            "(or a model folder containing one)"
        )
    return path


@lru_cache(maxsize=8)
def get_counter(spec: str = DEFAULT_TOKENIZER) -> TokenCounter:
    """A cached :class:`TokenCounter` for ``spec``."""
    return TokenCounter(spec)


__all__ = ["DEFAULT_TOKENIZER", "TokenCounter", "TokenIndex", "get_counter"]
