"""LLM judges: correctness (1-5 against a reference), faithfulness and relevancy (yes/no).

Each judge renders a prompt (ours by default, any file the user gives
instead), asks for JSON (a JSON schema goes with the request; servers that
refuse it still get the instruction in the prompt), and reads the reply with
the tolerant parser of :mod:`ragrade.judge.parse`. Every sample ends as one
of ``ok`` (a value), ``unparsed`` (the raw text is kept) or ``failed`` (the
request error is kept); nothing becomes a number it was not: a reply cut off
at the token limit, or one that repeats the prompt's placeholders, is unparsed.

Self-consistency: with ``samples > 1`` each answer is judged several times
at a temperature above zero with distinct seeds; the score is the mean
(correctness) or the majority verdict (yes/no, 0.5 on a tie), and the spread
is reported.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.judge.inputs import AnswerItem
from ragrade.judge.parse import Parsed, parse_score, parse_verdict
from ragrade.llm.base import LLM, Completion, GenerationRequest, Message, run_sync

Kind = Literal["score", "verdict"]
PLACEHOLDERS = ("{query}", "{answer}", "{reference}", "{contexts}")

_SCORE_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}
_VERDICT_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}, "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class MetricSpec:
    """What an LLM judge measures, what it needs, and the placeholders its prompt must contain."""

    name: str
    kind: Kind
    needs: tuple[str, ...]  # item fields that must be present: "query", "reference", "contexts"
    required_placeholders: tuple[str, ...]
    low: float = 1.0
    high: float = 5.0


SPECS: dict[str, MetricSpec] = {
    "correctness": MetricSpec("correctness", "score", ("query", "reference"), ("{answer}", "{reference}")),
    "faithfulness": MetricSpec("faithfulness", "verdict", ("contexts",), ("{answer}", "{contexts}"), 0.0, 1.0),
    "relevancy": MetricSpec(
        "relevancy", "verdict", ("query", "contexts"), ("{query}", "{answer}", "{contexts}"), 0.0, 1.0
    ),
}


@dataclass(frozen=True)
class LLMJudgeConfig:
    """Sampling and prompt settings shared by the LLM judges."""

    samples: int = 1
    temperature: float = 0.0
    sample_temperature: float = 0.7  # used when samples > 1 and temperature is 0
    seed: int = 0
    max_tokens: int = 256
    max_context_chars: int = 12000
    prompt_file: str | None = None
    json_schema: bool = True


def default_prompt(metric: str) -> str:
    """The packaged prompt template of ``metric``."""
    return resources.files("ragrade.judge").joinpath("prompts", f"{metric}.txt").read_text(encoding="utf-8")


def load_prompt(spec: MetricSpec, path: str | None) -> str:
    """The template from ``path`` (or the default), checked for the placeholders the metric needs."""
    if path is None:
        return default_prompt(spec.name)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the {spec.name} prompt file {path}: {exc.strerror or exc}") from exc
    missing = [p for p in spec.required_placeholders if p not in text]
    if missing:
        raise ConfigError(
            f"the {spec.name} prompt {path} lacks the placeholder(s) {', '.join(missing)}; "
            f"available: {', '.join(PLACEHOLDERS)}"
        )
    return text


def format_contexts(contexts: Sequence[str], max_chars: int) -> str:
    """Number the passages ``[1] ...``; the total is cut at ``max_chars`` with a visible marker."""
    parts: list[str] = []
    used = 0
    for i, text in enumerate(contexts, start=1):
        block = f"[{i}] {text.strip()}"
        if used + len(block) > max_chars:
            room = max(0, max_chars - used)
            parts.append(block[:room] + " [...]")
            parts.append(f"({len(contexts) - i} more passage(s) left out for length)" if i < len(contexts) else "")
            break
        parts.append(block)
        used += len(block) + 2
    return "\n\n".join(p for p in parts if p)


def render(template: str, item: AnswerItem, max_context_chars: int) -> str:
    """Fill the four placeholders; other braces in the template are left alone."""
    values = {
        "{query}": item.query or "",
        "{answer}": item.answer or "",
        "{reference}": "\n".join(f"- {r}" for r in item.references)
        if len(item.references) > 1
        else (item.references[0] if item.references else ""),
        "{contexts}": format_contexts(item.contexts, max_context_chars),
    }
    out = template
    for key, value in values.items():
        out = out.replace(key, value)
    return out


#: how JSON was asked of the server, strongest first: a reply asked as plain "text" was parsed tolerantly
RESPONSE_FORMATS = ("json_schema", "json_object", "text")


class _Sampling(Protocol):
    @property
    def seed(self) -> int: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def json_schema(self) -> bool: ...


def llm_record(llm: LLM, config: _Sampling) -> JSONObject:
    """The judge LLM as a judge's description records it: its own description, its name, whether it is an
    offline baseline (whose verdicts are no model's), and the settings of every request made to it."""
    return {
        "llm": llm.describe(),
        "llm_name": llm.name,
        "baseline": bool(getattr(llm, "is_baseline", False)),
        "seed": config.seed,
        "max_tokens": config.max_tokens,
        "json_schema": config.json_schema,
    }


def server_identity(record: Mapping[str, Any]) -> tuple[object, ...]:
    """The parts of a judge LLM's description (``llm_record``'s ``llm``) that say which model on which server
    gives its verdicts (base URL, extra_body): empty for a model without a server, so that the fingerprints of
    offline and in-process judges stay what they were."""
    llm = record.get("llm") if isinstance(record.get("llm"), Mapping) else {}
    assert isinstance(llm, Mapping)
    found = tuple((k, json.dumps(llm.get(k), sort_keys=True)) for k in ("base_url", "extra_body") if llm.get(k))
    return found


def weakest_format(formats: Iterable[str | None]) -> str | None:
    """The weakest of the response formats several requests were asked with ("text" beats "json_object" beats
    "json_schema"); None when none is known. An unknown name counts as weaker than all three."""
    known = [f for f in formats if f is not None]
    if not known:
        return None
    rank = {f: i for i, f in enumerate(RESPONSE_FORMATS)}
    return max(known, key=lambda f: (rank.get(f, len(RESPONSE_FORMATS)), f))


def _sample_record(completion: Completion, parsed: Parsed | None) -> dict[str, Any]:
    if not completion.ok:
        return {"status": "failed", "error": completion.error or "no text", "attempts": completion.attempts}
    assert parsed is not None
    rec: JSONObject = {"status": parsed.status, "raw": completion.text}
    if parsed.status == "ok":
        rec.update(value=parsed.value, method=parsed.method, reason=parsed.reason)
    else:
        rec["note"] = parsed.note
    if completion.cached:
        rec["cached"] = True
    if completion.response_format is not None:
        rec["response_format"] = completion.response_format
    return rec


def aggregate(kind: Kind, samples: list[dict[str, Any]]) -> JSONObject:
    """Combine sample records into one metric record (status, score, spread, counts)."""
    values = [float(s["value"]) for s in samples if s["status"] == "ok"]
    counts = {f"n_{st}": sum(1 for s in samples if s["status"] == st) for st in ("ok", "unparsed", "failed")}
    out: JSONObject = {"n_samples": len(samples), **counts}
    if not values:
        out["status"] = "failed" if counts["n_failed"] == len(samples) else "unparsed"
        out["score"] = None
        return out
    out["status"] = "ok"
    if kind == "score":
        out["score"] = statistics.fmean(values)
        if len(samples) > 1:
            out["spread"] = {
                "std": statistics.pstdev(values),
                "min": min(values),
                "max": max(values),
                "median": statistics.median(values),
            }
    else:
        yes = statistics.fmean(values)
        out["score"] = 1.0 if yes > 0.5 else 0.0 if yes < 0.5 else 0.5
        if len(samples) > 1:
            majority = out["score"]
            agree = sum(1 for v in values if v == majority) / len(values) if majority != 0.5 else 0.5
            out["spread"] = {"yes_share": yes, "agreement": agree, "tie": majority == 0.5}
    reasons = [s.get("reason") for s in samples if s["status"] == "ok" and s.get("reason")]
    if reasons:
        out["reason"] = reasons[0]
    return out


class LLMJudge:
    """One LLM-judged metric over batches of answers."""

    uses_llm = True

    def __init__(self, metric: str, llm: LLM | None, config: LLMJudgeConfig | None = None) -> None:
        if metric not in SPECS:
            raise ConfigError(f"unknown LLM judge '{metric}'; valid: {', '.join(SPECS)}")
        if llm is None:
            raise ConfigError(f"the {metric} judge needs an LLM; give one with $llm PROVIDER/MODEL")
        self.spec = SPECS[metric]
        self.name = metric
        self.llm = llm
        self.config = config or LLMJudgeConfig()
        if self.config.samples < 1:
            raise ConfigError(f"$samples must be at least 1, got {self.config.samples}")
        self.template = load_prompt(self.spec, self.config.prompt_file)

    @property
    def temperature(self) -> float:
        """The sampling temperature actually used."""
        cfg = self.config
        return cfg.sample_temperature if cfg.samples > 1 and cfg.temperature == 0 else cfg.temperature

    def describe(self) -> JSONObject:
        """Judge model, prompt hash and sampling settings (for the summary and manifest)."""
        return {
            "metric": self.name,
            "kind": self.spec.kind,
            **llm_record(self.llm, self.config),
            "prompt_sha256": hashlib.sha256(self.template.encode()).hexdigest(),
            "prompt_file": self.config.prompt_file,
            "samples": self.config.samples,
            "temperature": self.temperature,
        }

    def fingerprint(self) -> str:
        """Hash of everything that changes a verdict: model, prompt, sampling."""
        d = self.describe()
        key = (
            d["llm_name"],
            d["prompt_sha256"],
            d["samples"],
            d["temperature"],
            d["seed"],
            d["max_tokens"],
            self.config.max_context_chars,
            *server_identity(d),  # another server's verdicts are not this one's
        )
        return hashlib.sha256(repr(key).encode()).hexdigest()[:12]

    def missing(self, item: AnswerItem) -> str | None:
        """Why ``item`` cannot be judged by this metric (None when it can)."""
        for need in self.spec.needs:
            have = {"query": item.query, "reference": item.references, "contexts": item.contexts}[need]
            if not have:
                return f"no {need}"
        return None

    def requests(self, item: AnswerItem) -> list[GenerationRequest]:
        """The ``samples`` requests for one answer."""
        prompt = render(self.template, item, self.config.max_context_chars)
        schema = _SCORE_SCHEMA if self.spec.kind == "score" else _VERDICT_SCHEMA
        n = self.config.samples
        return [
            GenerationRequest(
                messages=(Message("user", prompt),),
                temperature=self.temperature,
                max_tokens=self.config.max_tokens,
                seed=self.config.seed + i if n > 1 else self.config.seed,
                json_schema=schema if self.config.json_schema else None,
                task="judge",
                question=item.query,
                passages=tuple(item.contexts),
                meta={"metric": self.name, "id": item.id},
            )
            for i in range(n)
        ]

    def parse(self, text: str | None, finish_reason: str | None = None) -> Parsed:
        """Parse one reply with this metric's scale (cut off, or this prompt's placeholders echoed: unparsed)."""
        if self.spec.kind == "score":
            return parse_score(text, self.spec.low, self.spec.high, finish_reason=finish_reason, template=self.template)
        return parse_verdict(text, finish_reason=finish_reason, template=self.template)

    async def ascore(self, items: Sequence[AnswerItem]) -> list[JSONObject]:
        """One metric record per item (items must be judgeable: see :meth:`missing`)."""
        reqs: list[GenerationRequest] = []
        for item in items:
            reqs.extend(self.requests(item))
        completions = await self.llm.agenerate(reqs) if reqs else []
        if len(completions) != len(reqs):
            raise RuntimeError(f"the LLM returned {len(completions)} results for {len(reqs)} requests")
        n = self.config.samples
        out: list[JSONObject] = []
        for i, _item in enumerate(items):
            samples = []
            for comp in completions[i * n : (i + 1) * n]:
                samples.append(_sample_record(comp, self.parse(comp.text, comp.finish_reason) if comp.ok else None))
            rec = aggregate(self.spec.kind, samples)
            rec["response_format"] = weakest_format(s.get("response_format") for s in samples)
            rec["samples"] = samples
            out.append(rec)
        return out

    def score(self, items: Sequence[AnswerItem]) -> list[JSONObject]:
        """Synchronous :meth:`ascore`."""
        return run_sync(self.ascore(items))


__all__ = [
    "PLACEHOLDERS",
    "RESPONSE_FORMATS",
    "SPECS",
    "LLMJudge",
    "LLMJudgeConfig",
    "MetricSpec",
    "aggregate",
    "default_prompt",
    "format_contexts",
    "llm_record",
    "load_prompt",
    "render",
    "weakest_format",
]
