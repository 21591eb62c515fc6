"""The judge registry: every metric ``ragrade judge --metrics`` accepts, under kind ``judge``.

A judge has a ``name`` (the CLI metric name), ``uses_llm``, ``describe()``,
``fingerprint()`` (a hash of its settings: records made with other settings
are not reused on resume), ``missing(item)`` (why an answer cannot be scored,
or None) and ``score(items)`` returning one metric record per item. Records
carry ``status`` (``ok``/``unparsed``/``failed``) and, when ``ok``, a
``score`` plus metric-specific ``values``.

Factories take ``settings`` (:class:`JudgeSettings`) and ``llm`` (or None).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ragrade.io import JSONObject
from ragrade.judge.bertscore import BertScore, BertScoreConfig
from ragrade.judge.inputs import AnswerItem
from ragrade.judge.lexical import best_over_references
from ragrade.judge.llm_judges import LLMJudge, LLMJudgeConfig
from ragrade.llm.base import LLM
from ragrade.registry import register


class Judge(Protocol):
    """What every metric offers to the judging run."""

    name: str
    uses_llm: bool

    def describe(self) -> JSONObject:
        """Settings for the summary."""
        ...

    def fingerprint(self) -> str:
        """A short hash of the settings that change scores."""
        ...

    def missing(self, item: AnswerItem) -> str | None:
        """Why ``item`` cannot be scored, or None."""
        ...

    def score(self, items: Sequence[AnswerItem]) -> list[JSONObject]:
        """One record per item."""
        ...


@dataclass(frozen=True)
class JudgeSettings:
    """Per-metric settings gathered from the CLI or a config file."""

    llm_judge: LLMJudgeConfig = field(default_factory=LLMJudgeConfig)
    prompt_files: dict[str, str] = field(default_factory=dict)
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)


class BertScoreJudge:
    """BERTScore precision/recall/F1 of the answer against the reference(s); ``score`` is F1."""

    name = "bertscore"
    uses_llm = False

    def __init__(self, config: BertScoreConfig | None = None) -> None:
        self.scorer = BertScore(config)

    def prepare(self, items: Sequence[AnswerItem]) -> None:
        """Fix idf weights to the references of the whole input (when idf is on)."""
        if self.scorer.config.idf:
            self.scorer.set_idf_corpus([r for it in items for r in it.references])

    def describe(self) -> JSONObject:
        """Model, layer, idf."""
        return {"metric": self.name, **self.scorer.describe()}

    def fingerprint(self) -> str:
        """Model, layer and idf corpus hash."""
        return self.scorer.fingerprint()

    def missing(self, item: AnswerItem) -> str | None:
        """BERTScore needs a reference."""
        return None if item.references else "no reference"

    def score(self, items: Sequence[AnswerItem]) -> list[JSONObject]:
        """BERTScore of each item's answer."""
        res = self.scorer.score([it.answer or "" for it in items], [list(it.references) for it in items])
        out = []
        for i, it in enumerate(items):
            rec: JSONObject = {
                "status": "ok",
                "score": res.f1[i],
                "values": {"precision": res.precision[i], "recall": res.recall[i], "f1": res.f1[i]},
            }
            if not (it.answer or "").strip():
                rec["note"] = "empty answer scores 0"
            out.append(rec)
        return out


class ExactJudge:
    """SQuAD-style exact match and token F1 (best over references); ``score`` is exact match."""

    name = "exact"
    uses_llm = False

    def describe(self) -> JSONObject:
        """Normalisation used."""
        return {"metric": self.name, "normalisation": "squad", "values": ["em", "f1"]}

    def fingerprint(self) -> str:
        """Constant: the metric has no settings."""
        return hashlib.sha256(b"exact-squad-v1").hexdigest()[:12]

    def missing(self, item: AnswerItem) -> str | None:
        """Exact match needs a reference."""
        return None if item.references else "no reference"

    def score(self, items: Sequence[AnswerItem]) -> list[dict[str, object]]:
        """EM and token F1 of each item's answer."""
        out = []
        for it in items:
            em, f1 = best_over_references(it.answer or "", it.references)
            out.append({"status": "ok", "score": float(em), "values": {"em": float(em), "f1": f1}})
        return out


def _llm_judge(metric: str, settings: JudgeSettings, llm: LLM | None) -> LLMJudge:
    cfg = settings.llm_judge
    prompt = settings.prompt_files.get(metric)
    if prompt is not None:
        from dataclasses import replace

        cfg = replace(cfg, prompt_file=prompt)
    return LLMJudge(metric, llm, cfg)


@register("judge", "correctness")
def correctness(settings: JudgeSettings | None = None, llm: LLM | None = None) -> LLMJudge:
    """Correctness against the reference, 1-5, by an LLM judge."""
    return _llm_judge("correctness", settings or JudgeSettings(), llm)


@register("judge", "faithfulness")
def faithfulness(settings: JudgeSettings | None = None, llm: LLM | None = None) -> LLMJudge:
    """Is the answer supported by its contexts (yes/no), by an LLM judge."""
    return _llm_judge("faithfulness", settings or JudgeSettings(), llm)


@register("judge", "relevancy")
def relevancy(settings: JudgeSettings | None = None, llm: LLM | None = None) -> LLMJudge:
    """Do answer and contexts fit the query (yes/no), by an LLM judge."""
    return _llm_judge("relevancy", settings or JudgeSettings(), llm)


@register("judge", "bertscore")
def bertscore(settings: JudgeSettings | None = None, llm: LLM | None = None) -> BertScoreJudge:
    """BERTScore on a local encoder (bundled MiniLM by default)."""
    return BertScoreJudge((settings or JudgeSettings()).bertscore)


@register("judge", "exact")
def exact(settings: JudgeSettings | None = None, llm: LLM | None = None) -> ExactJudge:
    """Exact match and token F1."""
    return ExactJudge()


@register("judge", "claims")
def claims(settings: JudgeSettings | None = None, llm: LLM | None = None) -> object:
    """Claim-level diagnosis by an LLM; without one (``--llm offline/judge``) the offline baseline."""
    from ragrade.judge.claims import ClaimsConfig, ClaimsJudge
    from ragrade.judge.claims_offline import OfflineClaimsJudge

    s = settings or JudgeSettings()
    c = s.llm_judge
    cfg = ClaimsConfig(
        temperature=c.temperature,
        seed=c.seed,
        max_tokens=max(512, c.max_tokens),
        max_context_chars=c.max_context_chars,
        json_schema=c.json_schema,
        prompt_files={k: v for k, v in s.prompt_files.items() if k.startswith("claims_")},
    )
    return OfflineClaimsJudge(cfg) if llm is None else ClaimsJudge(llm, cfg)


__all__ = ["BertScoreJudge", "ExactJudge", "Judge", "JudgeSettings"]
