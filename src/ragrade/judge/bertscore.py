"""BERTScore with the ``bert-score`` package on a local model.

Candidate = the answer, reference = the reference answer (several references:
the best one counts, as bert-score does). The default model is the bundled
all-MiniLM-L6-v2; any local Hugging Face encoder path works. bert-score only
knows default layers for models it has a table for, so the layer is always
given explicitly (default: the model's last layer). No baseline rescaling:
that needs a downloaded baseline file for the exact model, and raw scores are
comparable within one run, which is what ranking configurations needs.

Empty answers score 0 (bert-score's own convention, applied here without
calling it because its empty-string path fails on recent transformers).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ragrade.deps import require
from ragrade.errors import ConfigError
from ragrade.io import JSONObject

DEFAULT_MODEL = "minilm"


@dataclass(frozen=True)
class BertScoreConfig:
    """Which model and layer BERTScore uses, and whether tokens are idf-weighted."""

    model: str = DEFAULT_MODEL
    num_layers: int | None = None  # None: the model's last layer
    idf: bool = False
    batch_size: int = 32


def resolve_model_path(model: str) -> str:
    """The local folder of ``model`` (``minilm`` = the bundled MiniLM)."""
    if model == DEFAULT_MODEL:
        from ragrade.embedding.embed import minilm_path

        return minilm_path()
    if not os.path.isdir(model):
        raise ConfigError(f"BERTScore model '{model}' is not a local folder (models are never downloaded)")
    return model


def model_num_layers(path: str) -> int:
    """The number of hidden layers declared in the model's config."""
    transformers = require("transformers", purpose="BERTScore")
    config = transformers.AutoConfig.from_pretrained(path)
    n = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layers", None)
    if not isinstance(n, int):
        raise ConfigError(f"cannot tell the number of layers of the model at {path}; give the layer explicitly")
    return n


@dataclass(frozen=True)
class BertScoreResult:
    """Precision, recall and F1 per candidate (same order as the input)."""

    precision: list[float]
    recall: list[float]
    f1: list[float]


class BertScore:
    """A loaded BERTScore scorer (model, layer, optional idf weights from references)."""

    def __init__(self, config: BertScoreConfig | None = None) -> None:
        self.config = config or BertScoreConfig()
        self.path = resolve_model_path(self.config.model)
        total = model_num_layers(self.path)
        layers = self.config.num_layers if self.config.num_layers is not None else total
        if not 1 <= layers <= total:
            raise ConfigError(f"BERTScore layer must be between 1 and {total} for this model, got {layers}")
        self.num_layers = layers
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        transformers = require("transformers", purpose="BERTScore")
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
        self._scorer = _load_scorer(self.path, layers)
        self._idf_sents: list[str] | None = None

    def set_idf_corpus(self, sentences: Sequence[str]) -> None:
        """Fix the idf weights to those of ``sentences`` (normally every reference of the run)."""
        self._idf_sents = sorted({s for s in sentences if s.strip()})

    def describe(self) -> JSONObject:
        """Arguments for the manifest and summary."""
        return {
            "model": self.config.model,
            "path": self.path,
            "num_layers": self.num_layers,
            "idf": self.config.idf,
            "rescaled": False,
            "package": "bert-score",
        }

    def fingerprint(self) -> str:
        """A short hash of everything that changes the scores (idf depends on the reference set)."""
        idf_key = hashlib.sha256("\x1f".join(self._idf_sents or []).encode()).hexdigest() if self.config.idf else ""
        key = (self.config.model, self.num_layers, self.config.idf, idf_key)
        return hashlib.sha256(repr(key).encode()).hexdigest()[:12]

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> BertScoreResult:
        """BERTScore of each candidate against its best reference.

        ``references[i]`` is a non-empty list of reference texts for ``candidates[i]``.
        With ``idf``, weights come from :meth:`set_idf_corpus` or, when it was not
        called, from the references given in this call.
        """
        if len(candidates) != len(references):
            raise ValueError("candidates and references differ in length")
        if any(not refs for refs in references):
            raise ValueError("every candidate needs at least one reference")
        n = len(candidates)
        p, r, f = [0.0] * n, [0.0] * n, [0.0] * n
        live = [i for i, c in enumerate(candidates) if c.strip()]
        if not live:
            return BertScoreResult(p, r, f)
        scorer = self._scorer
        if self.config.idf:
            idf_sents = self._idf_sents or sorted({ref for refs in references for ref in refs if ref.strip()})
            scorer._idf = True
            scorer._idf_dict = None
            scorer.compute_idf(idf_sents)
        else:
            scorer._idf = False
        cands = [candidates[i] for i in live]
        refs = [[ref for ref in references[i] if ref.strip()] or [" "] for i in live]
        tp, tr, tf = scorer.score(cands, refs, batch_size=self.config.batch_size)
        for j, i in enumerate(live):
            p[i], r[i], f[i] = float(tp[j]), float(tr[j]), float(tf[j])
        return BertScoreResult(p, r, f)


@lru_cache(maxsize=2)
def _load_scorer(path: str, num_layers: int) -> Any:
    """A bert-score ``BERTScorer`` on CPU, loaded once per (model, layer)."""
    bert_score = require("bert_score", package="bert-score", extra="bertscore", purpose="BERTScore")
    return bert_score.BERTScorer(
        model_type=path,
        num_layers=num_layers,
        lang="en",
        device="cpu",
        nthreads=0,
        rescale_with_baseline=False,
        idf=False,
    )


__all__ = ["DEFAULT_MODEL", "BertScore", "BertScoreConfig", "BertScoreResult", "model_num_layers", "resolve_model_path"]
