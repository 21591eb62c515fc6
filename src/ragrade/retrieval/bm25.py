"""BM25 with bm25s: configurable tokenisation (stemmer, stopwords, lowercasing) and scoring
variant, saved as JSON + ``.npy`` arrays (no pickle)."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragrade.deps import require
from ragrade.errors import ConfigError, DataError
from ragrade.io import read_json

Results = list[list[tuple[int, float]]]


class BM25Config(BaseModel):
    """How BM25 tokenises and scores (recorded in the index manifest)."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field(
        default="lucene", description="BM25 variant as bm25s computes it (lucene, robertson, atire, bm25l, bm25+)."
    )
    k1: float = Field(default=1.5, description="Term-frequency saturation: higher lets repeated terms count more.")
    b: float = Field(default=0.75, description="Length normalisation: 0 ignores passage length, 1 normalises fully.")
    delta: float = Field(default=0.5, description="The lower bound added to term scores by bm25l and bm25+.")
    stemmer: str | None = Field(
        default="english", description="PyStemmer language of the stemmer applied to every token; none: no stemming."
    )
    stopwords: str | list[str] | None = Field(
        default="en", description="Stopwords dropped before indexing: a language bm25s knows, a list, or none."
    )
    lower: bool = Field(default=True, description="Lowercase the text before it is split into tokens.")


def import_bm25s(module: str = "bm25s") -> Any:
    """``bm25s`` (or one of its modules), imported without letting JAX take a GPU.

    When JAX is installed, importing bm25s imports it (for a faster top-k) and runs a first top-k, which
    starts JAX on its default device; on a GPU JAX then reserves 75% of the card's memory for itself. Measured
    on an H200 with a 7B ``hf/`` model: JAX's reservation made the model's batches run out of memory seven
    times, halving them each time. Unless the user set them, JAX is kept on the CPU (``JAX_PLATFORMS=cpu``,
    only when JAX is not imported yet) and allocates on demand (``XLA_PYTHON_CLIENT_PREALLOCATE=false``);
    bm25s's top-k runs on the CPU either way."""
    if "jax" not in sys.modules:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return require(module, package="bm25s", purpose="BM25 retrieval")


def _stemmer(name: str | None) -> object:
    if not name or name == "none":
        return None
    stemmer_mod = require("Stemmer", package="PyStemmer", purpose="BM25 stemming")
    try:
        return stemmer_mod.Stemmer(name)
    except KeyError as exc:
        raise ConfigError(
            f"unknown stemmer language '{name}'; valid choices: {', '.join(stemmer_mod.algorithms())}, none"
        ) from exc


def _tokenizer(cfg: BM25Config) -> Any:
    tok_mod = import_bm25s("bm25s.tokenization")
    stop: object = cfg.stopwords if cfg.stopwords not in (None, "none") else None
    try:
        return tok_mod.Tokenizer(lower=cfg.lower, stopwords=stop, stemmer=_stemmer(cfg.stemmer))
    except ValueError as exc:
        raise ConfigError(
            f"unknown BM25 stopwords '{cfg.stopwords}'; give en, none, or a language name bm25s knows "
            "(german, dutch, french, spanish, portuguese, italian, russian, swedish, norwegian, chinese, ...)"
        ) from exc


def check_bm25_config(cfg: BM25Config) -> None:
    """ConfigError now (before any file is written) when the stemmer or stopwords are unknown."""
    _tokenizer(cfg)


class BM25Index:
    """A bm25s index over chunk texts (position = chunk order)."""

    def __init__(self, retriever: Any, tokenizer: Any, cfg: BM25Config, n_docs: int) -> None:
        self._retriever = retriever
        self._tokenizer = tokenizer
        self.cfg = cfg
        self.n_docs = n_docs
        self._lock = threading.Lock()

    @classmethod
    def build(cls, texts: Sequence[str], cfg: BM25Config) -> BM25Index:
        """Tokenise ``texts`` and index them."""
        bm25s = import_bm25s()
        tokenizer = _tokenizer(cfg)
        tokens = tokenizer.tokenize(list(texts), return_as="tuple", show_progress=False)
        retriever = bm25s.BM25(method=cfg.method, k1=cfg.k1, b=cfg.b, delta=cfg.delta)
        retriever.index(tokens, show_progress=False)
        return cls(retriever, tokenizer, cfg, len(texts))

    def save(self, folder: str | Path) -> None:
        """Write the index, the tokenizer vocabulary and the config to ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self._retriever.save(str(folder), show_progress=False)
        self._tokenizer.save_vocab(str(folder))
        self._tokenizer.save_stopwords(str(folder))
        (folder / "bm25_config.json").write_text(
            json.dumps({"version": 1, "n_docs": self.n_docs, **self.cfg.model_dump()}, indent=2) + "\n",
            encoding="utf-8",
        )

    @classmethod
    def load(cls, folder: str | Path) -> BM25Index:
        """Read an index written by :meth:`save`."""
        bm25s = import_bm25s()
        folder = Path(folder)
        cfg_path = folder / "bm25_config.json"
        if not cfg_path.is_file():
            raise DataError(f"{folder}: no BM25 index here (bm25_config.json missing)")
        raw = read_json(cfg_path)
        try:
            if not isinstance(raw, dict):
                raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
            n_docs = int(raw.pop("n_docs", 0))
            raw.pop("version", None)
            cfg = BM25Config.model_validate(raw)
            retriever = bm25s.BM25.load(str(folder), mmap=False, show_progress=False)
            tokenizer = _tokenizer(cfg)
            tokenizer.load_vocab(str(folder))
            tokenizer.load_stopwords(str(folder))
        except (ValueError, TypeError, KeyError, OSError, RecursionError) as exc:  # json/pydantic/numpy errors
            first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            raise DataError(f"{folder}: damaged BM25 index ({first}); rebuild it with `ragrade index`") from exc
        return cls(retriever, tokenizer, cfg, n_docs)

    def search(self, queries: Sequence[str], k: int) -> Results:
        """Top-k positions with positive BM25 scores, best first (ties by position); once per batch and k."""
        from ragrade.retrieval.query_memo import memo_search

        k = min(k, self.n_docs)
        if k <= 0:
            return [[] for _ in queries]
        return memo_search(_SEARCHES, self, queries, k, lambda: self._search(queries, k))

    def _search(self, queries: Sequence[str], k: int) -> Results:
        with self._lock:
            ids = self._tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
            docs, scores = self._retriever.retrieve(ids, k=k, show_progress=False, n_threads=1)
        out: Results = []
        for row_d, row_s in zip(np.asarray(docs), np.asarray(scores), strict=True):
            pairs = [(int(d), float(s)) for d, s in zip(row_d, row_s, strict=True) if s > 0]
            pairs.sort(key=lambda p: (-p[1], p[0]))
            out.append(pairs)
        return out


def _searches() -> Any:
    from ragrade.retrieval.query_memo import register_memo

    return register_memo(256)


_SEARCHES = _searches()  # searches by (index, k, queries): tokenised and scored once per batch


__all__ = ["BM25Config", "BM25Index", "check_bm25_config"]
