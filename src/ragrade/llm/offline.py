"""Offline baselines (provider ``offline``): honest reference points that need no language model.

``offline/student``
    A multiple-choice student. It reads the structured view of a request
    (question, passages, choices / continuations). For a cloze question (one
    blank ``____``) it fills the blank with each candidate and scores the filled
    sentence against the passages: lexical evidence (the candidate occurring in a
    passage with the blank's neighbouring words next to it, and the question's
    words nearby) plus MiniLM cosine between the filled question and the passage
    sentences. For other questions it scores each candidate by how strongly it
    occurs in the passage sentences that match the question. Scores are returned
    as a log-softmax over the candidates (log-likelihood-like, higher is better).
    Without passages the scores carry no information about the answer (a
    deterministic hash of the question and candidate breaks ties), so a
    closed-book student lands at chance.

``offline/extractive``
    An extractive reader: answers with the passage sentence (or, with
    ``span="short"``, the key term of it) that best matches the question, and
    answers exactly :data:`~ragrade.llm.phrases.REJECTION_SENTENCE` when there are
    no passages or the best match scores below ``threshold``.

Both are labelled baselines in :meth:`describe` and in every manifest.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragrade.errors import ConfigError, DataError
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.llm.cache import ResponseCache
from ragrade.llm.core import BaseLLM, structured_view
from ragrade.llm.limits import LimitConfig
from ragrade.llm.phrases import REJECTION_SENTENCE
from ragrade.registry import did_you_mean

if TYPE_CHECKING:
    from ragrade.embedding.cache import EmbeddingCache

BLANK = "____"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
VERSION = 4  # bump when scoring or the fixed sentences change (part of the cache key)
_WORD = re.compile(r"[a-z0-9]+(?:[.,'\-][a-z0-9]+)*")
_SENT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n{2,}")
_BLANK_RE = re.compile(r"_{3,}")
_STOP_TEXT = (
    "a an the of to in on at by for with from and or but is are was were be been being it its this that "
    "these those as into than then there their they them he she his her we you your our i not no do does "
    "did which who whom whose what when where why how has have had will would can could should may might "
    "must shall also such so if about over under between after before during each other more most some "
    "any all "
)
STOPWORDS = frozenset(_STOP_TEXT.split())


def words(text: str) -> list[str]:
    """Lower-cased word tokens (numbers keep their inner separators, e.g. ``1,200`` and ``3.5``)."""
    return _WORD.findall(text.lower())


def content(tokens: Sequence[str]) -> list[str]:
    """``tokens`` without stopwords."""
    return [t for t in tokens if t not in STOPWORDS]


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (simple rules; keeps every character except separating whitespace)."""
    return [s.strip() for s in _SENT.split(text) if s and s.strip()]


def _hash_unit(*parts: str) -> float:
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _log_softmax(x: npt.NDArray[np.float64]) -> list[float]:
    z = x - x.max()
    return [float(v) for v in z - math.log(float(np.exp(z).sum()))]


class _Embeddings:
    """MiniLM vectors of the texts the baselines score, each distinct text embedded once per process.

    Texts are embedded with the embedder's ``embed_fixed`` where it has one (batches of one fixed shape, so a
    text's vector depends on that text only, never on what it was batched with: scores do not depend on
    shard sizes, concurrency or timing) and kept in the on-disk embedding cache (``$RAGRADE_CACHE_DIR``)
    under the embedder's cache key, so a rerun or another process embeds nothing again.
    """

    def __init__(self, max_items: int = 200_000) -> None:
        self._memo: dict[tuple[str, str], npt.NDArray[np.float32]] = {}
        self._lock = threading.Lock()
        self._compute_lock = threading.Lock()  # one computation at a time: no text is embedded twice
        self._disk: dict[str, object] = {}
        self.max_items = max_items
        self.computed = 0  # texts sent to the embedder (neither in memory nor on disk)

    def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        from ragrade.embedding.embed import default_embedder

        emb = default_embedder()
        fixed = getattr(emb, "embed_fixed", None)
        ckey = getattr(emb, "cache_key", None)
        space = (ckey or emb.name) + ("|fixed-shape-v2" if fixed is not None else "")
        found = self._found(space, texts)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            with self._compute_lock:
                found.update(self._found(space, missing))
                missing = [t for t in missing if t not in found]
                if missing:
                    vecs = self._compute(space if ckey else None, fixed or emb.embed, missing)
                    new = dict(zip(missing, vecs, strict=True))
                    found.update(new)
                    with self._lock:
                        if len(self._memo) + len(new) > self.max_items:
                            self._memo.clear()
                        self._memo.update({(space, t): v for t, v in new.items()})
        return np.stack([found[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    def _found(self, space: str, texts: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        with self._lock:
            return {t: v for t in texts if (v := self._memo.get((space, t))) is not None}

    def _compute(
        self, key: str | None, embed: Callable[[Sequence[str]], npt.NDArray[np.float32]], texts: list[str]
    ) -> npt.NDArray[np.float32]:
        """Vectors of ``texts``: from the disk cache where present (``key``), the rest embedded and stored."""
        disk = self._disk_cache() if key is not None else None
        counted: list[int] = []

        def compute(part: Sequence[str]) -> npt.NDArray[np.float32]:
            counted.append(len(part))
            return np.asarray(embed(part), dtype=np.float32)

        if disk is not None and key is not None:
            try:
                vecs, _ = disk.embed(key, texts, compute)
            except (OSError, sqlite3.Error):  # an unusable cache file: compute directly
                vecs = compute(texts)
        else:
            vecs = compute(texts)
        self.computed += sum(counted)
        return np.asarray(vecs, dtype=np.float32)

    def _disk_cache(self) -> EmbeddingCache | None:
        from ragrade.embedding.cache import EmbeddingCache
        from ragrade.embedding.onnx_embed import cache_root

        root = str(cache_root())
        if root not in self._disk:
            try:
                self._disk[root] = EmbeddingCache()
            except (OSError, DataError):
                self._disk[root] = None
        found = self._disk[root]
        return found if isinstance(found, EmbeddingCache) else None

    def clear(self) -> None:
        """Forget every vector held in memory (the disk cache stays)."""
        with self._lock:
            self._memo.clear()


_EMBED = _Embeddings()


class OfflineBaseline(BaseLLM):
    """Shared scoring of the two offline baselines."""

    provider = "offline"
    is_baseline = True
    supports_loglikelihood = True

    def __init__(
        self,
        model: str,
        *,
        cache: ResponseCache | None = None,
        limits: LimitConfig | None = None,
        semantic: bool = True,
        lexical_weight: float = 1.0,
        semantic_weight: float = 2.0,
        sharpness: float = 3.0,
    ) -> None:
        super().__init__(model, cache=cache, limits=limits)
        self.semantic = semantic
        self.lexical_weight = lexical_weight
        self.semantic_weight = semantic_weight
        self.sharpness = sharpness

    def _key_extra(self, req: GenerationRequest | LoglikelihoodRequest) -> dict[str, Any]:
        return {"view": structured_view(req), "config": self._config(), "version": VERSION}

    async def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        # each baseline answers in a worker thread, keeping the event loop free
        return await asyncio.to_thread(self._generate_sync, reqs)

    def _generate_sync(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        raise NotImplementedError(f"{type(self).__name__} does not generate")

    def _config(self) -> dict[str, Any]:
        return {
            "semantic": self.semantic,
            "lexical_weight": self.lexical_weight,
            "semantic_weight": self.semantic_weight,
            "sharpness": self.sharpness,
        }

    async def _loglikelihood_batch(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        return await asyncio.to_thread(self._loglik_sync, reqs)

    def prefetch(self, items: Sequence[tuple[str, Sequence[str], Sequence[str]]]) -> None:
        """Embed, in one batched call, every text the scoring of (question, passages, choices) ``items`` needs."""
        if not self.semantic:
            return
        texts: list[str] = []
        for question, passages, choices in items:
            passages = [p for p in passages if p and p.strip()]
            if not passages:
                continue
            texts.extend(s for p in passages for s in sentences(p))
            if choices:
                texts.extend(
                    _BLANK_RE.sub(c, question, count=1) if _BLANK_RE.search(question) else f"{question} {c}"
                    for c in choices
                )
            else:
                texts.append(question)
        if texts:
            _EMBED(list(dict.fromkeys(texts)))

    def _loglik_sync(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        self.prefetch(
            [
                (r.question if r.question is not None else r.context, r.passages, [c.strip() for c in r.continuations])
                for r in reqs
            ]
        )
        out = []
        for req in reqs:
            question = req.question if req.question is not None else req.context
            cands = [c.strip() for c in req.continuations]
            try:
                scores = self.choice_scores(question, list(req.passages), cands)
            except Exception as exc:  # recorded per request, never raised from the batch
                out.append(LoglikelihoodResult(logprobs=None, error=f"{type(exc).__name__}: {exc}"))
                continue
            out.append(
                LoglikelihoodResult(
                    logprobs=scores, token_counts=[max(1, len(words(c))) for c in cands], method="baseline"
                )
            )
        return out

    # -- scoring -------------------------------------------------------------------------------
    def choice_scores(self, question: str, passages: Sequence[str], choices: Sequence[str]) -> list[float]:
        """Log-softmax scores of ``choices`` for ``question`` given ``passages`` (uninformative without them)."""
        if not choices:
            return []
        passages = [p for p in passages if p and p.strip()]
        if not passages:
            noise = np.array([_hash_unit(question, c) for c in choices]) * 1e-3
            return _log_softmax(noise)
        sents = [s for p in passages for s in sentences(p)] or list(passages)
        if _BLANK_RE.search(question):
            lex = np.array([self._cloze_evidence(question, c, passages) for c in choices])
            texts = [_BLANK_RE.sub(c, question, count=1) for c in choices]
        else:
            lex = np.array([self._open_evidence(question, c, sents) for c in choices])
            texts = [f"{question} {c}" for c in choices]
        sem = np.zeros(len(choices))
        if self.semantic:
            q = _EMBED(texts)
            s = _EMBED(sents)
            sem = (q @ s.T).max(axis=1).astype(np.float64)
        noise = np.array([_hash_unit(question, c) for c in choices]) * 1e-6
        combined = self.lexical_weight * lex + self.semantic_weight * sem + noise
        return _log_softmax(self.sharpness * combined)

    @staticmethod
    def _cloze_evidence(question: str, cand: str, passages: Sequence[str]) -> float:
        """How well the passages support ``cand`` in the blank: matching neighbours and nearby question words."""
        before, after = _BLANK_RE.split(question, maxsplit=1)
        left, right, ct = words(before)[-4:], words(after)[:4], words(cand)
        qwords = set(content(words(before) + words(after)))
        if not ct:
            return 0.0
        best = 0.0
        for p in passages:
            pt = words(p)
            n = len(ct)
            for i in range(len(pt) - n + 1):
                if pt[i : i + n] != ct:
                    continue
                lmatch = 0
                while lmatch < len(left) and i - lmatch - 1 >= 0 and pt[i - lmatch - 1] == left[-lmatch - 1]:
                    lmatch += 1
                rmatch = 0
                while rmatch < len(right) and i + n + rmatch < len(pt) and pt[i + n + rmatch] == right[rmatch]:
                    rmatch += 1
                window = set(pt[max(0, i - 15) : i + n + 15])
                near = len(qwords & window) / max(1, len(qwords))
                best = max(best, 0.5 + lmatch + rmatch + 2.0 * near)
        return best

    @staticmethod
    def _open_evidence(question: str, cand: str, sents: Sequence[str]) -> float:
        """Candidate support in sentences weighted by how much each sentence matches the question."""
        qwords = set(content(words(question)))
        cw = set(content(words(cand))) or set(words(cand))
        if not cw:
            return 0.0
        best = 0.0
        for s in sents:
            st = set(words(s))
            rel = len(qwords & st) / max(1, len(qwords))
            cover = len(cw & st) / len(cw)
            best = max(best, cover * (0.5 + 2.0 * rel))
        return best

    def best_sentences(self, question: str, passages: Sequence[str]) -> list[tuple[float, str]]:
        """Passage sentences ranked by match with ``question`` (0.5 lexical coverage + 0.5 cosine)."""
        sents = [s for p in passages if p and p.strip() for s in sentences(p)]
        if not sents:
            return []
        qwords = content(words(question))
        qset = set(qwords)
        lex = np.array([len(qset & set(words(s))) / max(1, len(qset)) for s in sents])
        if self.semantic:
            sem = (_EMBED([question]) @ _EMBED(sents).T)[0].astype(np.float64)
            score = 0.5 * lex + 0.5 * sem
        else:
            score = lex
        order = np.argsort(-score, kind="stable")
        return [(float(score[i]), sents[i]) for i in order]

    def describe(self) -> dict[str, Any]:
        """Manifest entry, labelled as a baseline."""
        return {**super().describe(), **self._config(), "version": VERSION}


class OfflineStudent(OfflineBaseline):
    """The multiple-choice student baseline (see module docstring)."""

    def _generate_sync(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        self.prefetch([(r.question or "", r.passages, r.choices) for r in reqs])
        out = []
        for req in reqs:
            if not req.choices or req.question is None:
                out.append(
                    Completion(
                        text=None,
                        error="offline/student answers multiple-choice questions only: "
                        "give question and choices (task='mcq')",
                    )
                )
                continue
            try:
                scores = self.choice_scores(req.question, list(req.passages), list(req.choices))
            except Exception as exc:
                out.append(Completion(text=None, error=f"{type(exc).__name__}: {exc}"))
                continue
            letter = LETTERS[int(np.argmax(scores))]
            out.append(Completion(text=letter, finish_reason="stop", usage=Usage(_view_tokens(req), 1)))
        return out


class OfflineExtractive(OfflineBaseline):
    """The extractive reader baseline (see module docstring)."""

    def __init__(self, model: str, *, threshold: float = 0.35, span: str = "sentence", **kw: Any) -> None:
        super().__init__(model, **kw)
        if span not in ("sentence", "short"):
            raise ConfigError(f"span must be 'sentence' or 'short', got '{span}'")
        self.threshold = threshold
        self.span = span

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "threshold": self.threshold, "span": self.span}

    def _generate_sync(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        self.prefetch([(r.question or "", r.passages, r.choices) for r in reqs])
        out = []
        for req in reqs:
            try:
                text = self.answer(req)
            except Exception as exc:
                out.append(Completion(text=None, error=f"{type(exc).__name__}: {exc}"))
                continue
            out.append(Completion(text=text, finish_reason="stop", usage=Usage(_view_tokens(req), len(words(text)))))
        return out

    def answer(self, req: GenerationRequest) -> str:
        """The reply to one request: a letter for MCQ, else a span of the passages or the rejection sentence."""
        question = req.question
        if question is None and req.messages:
            question = req.messages[-1].content
        question = question if question is not None else (req.prompt or "")
        if req.choices:
            return LETTERS[int(np.argmax(self.choice_scores(question, list(req.passages), list(req.choices))))]
        ranked = self.best_sentences(question, req.passages)
        if not ranked or ranked[0][0] < self.threshold:
            return REJECTION_SENTENCE
        best = ranked[0][1]
        return key_term(question, best) if self.span == "short" else best


_NUMBER = re.compile(r"\b\d[\d,.]*\b(?:\s*(?:%|percent|euros?|dollars?|years?|days?|months?|km|kg|m))?")
_PROPER = re.compile(r"\b[A-Z][\w'-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'-]*)*")


def key_term(question: str, sentence: str) -> str:
    """A short answer span of ``sentence``: a number for how-much/when questions, else a name, else the sentence."""
    q = question.lower()
    qset = set(words(question))
    wants_number = any(
        w in q
        for w in (
            "how many",
            "how much",
            "when",
            "what year",
            "which year",
            "how long",
            "how old",
            "what percentage",
            "how far",
        )
    )
    pattern = _NUMBER if wants_number else _PROPER
    spans = [m.group(0).strip(" ,.") for m in pattern.finditer(sentence)]
    spans = [s for s in spans if s and not set(words(s)) <= qset]
    if not spans and not wants_number:
        spans = [m.group(0).strip(" ,.") for m in _NUMBER.finditer(sentence)]
        spans = [s for s in spans if s and not set(words(s)) <= qset]
    return spans[0] if spans else sentence


def _view_tokens(req: GenerationRequest) -> int:
    return sum(len(words(t)) for t in [req.question or "", *req.passages, *req.choices])


_MODELS = {"student": OfflineStudent, "extractive": OfflineExtractive}
#: the names of the offline baselines (``offline/<name>``)
OFFLINE_MODELS = tuple(sorted(_MODELS))


def create_offline(model: str, **kw: Any) -> OfflineBaseline:
    """Build ``offline/<model>`` (``student`` or ``extractive``)."""
    cls = _MODELS.get(model)
    if cls is None:
        raise ConfigError(
            f"unknown offline baseline '{model}'; valid: {', '.join(sorted(_MODELS))}."
            + did_you_mean(model, sorted(_MODELS))
        )
    built: OfflineBaseline = cls(model, **kw)
    return built


__all__ = [
    "BLANK",
    "OFFLINE_MODELS",
    "OfflineBaseline",
    "OfflineExtractive",
    "OfflineStudent",
    "create_offline",
    "key_term",
    "sentences",
    "words",
]
