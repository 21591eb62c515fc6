"""Claim-level diagnosis (``--metrics claims``): where a RAG pipeline loses the facts.

For every answer the judge LLM (1) splits the answer and the reference answer
into atomic claims, then (2) checks each claim for entailment against the
reference (answer claims), the answer (reference claims) and every retrieved
passage (all claims at once, one request per passage). Replies are JSON, read
with the tolerant parser of :mod:`ragrade.judge.claims_parse`; the metrics of
:mod:`ragrade.judge.claims_metrics` follow from the verdicts.

Every request is kept in the record (``requests``: status, raw reply or error,
parsed claims or verdicts). A failed request makes the record ``failed``
(missing data, never a score); a rerun re-asks only the failed requests and
reuses every other one. An unparsed reply stays unparsed: its claims or
verdicts are unknown and counted. ``--llm offline/judge`` runs the offline
baseline instead (:mod:`ragrade.judge.claims_offline`).

Prompts are ours (``prompts/claims_extract.txt``, ``prompts/claims_check.txt``);
``--prompt claims_extract=FILE`` / ``--prompt claims_check=FILE`` replace them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.judge.claims_metrics import Verdict, claim_metrics
from ragrade.judge.claims_parse import parse_claims, parse_verdicts
from ragrade.judge.inputs import AnswerItem
from ragrade.judge.llm_judges import llm_record, server_identity, weakest_format
from ragrade.llm.base import LLM, Completion, GenerationRequest, Message, run_sync

OFFLINE_JUDGE = "offline/judge"
#: version of the abstention rule (part of the fingerprints: records scored before it are scored again)
ABSTENTION_RULE = "abstain-v1"
CLAIMS_PROMPTS: dict[str, tuple[str, ...]] = {
    "claims_extract": ("{text}",),
    "claims_check": ("{premise}", "{claims}"),
}
_EXTRACT_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
    "required": ["claims"],
    "additionalProperties": False,
}
_CHECK_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {"verdicts": {"type": "array", "items": {"type": "string", "enum": ["yes", "no"]}}},
    "required": ["verdicts"],
    "additionalProperties": False,
}


def load_claims_prompt(name: str, path: str | None) -> str:
    """The template ``name`` from ``path`` (or ours), checked for its placeholders."""
    if path is None:
        from importlib import resources

        return resources.files("ragrade.judge").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the {name} prompt file {path}: {exc.strerror or exc}") from exc
    missing = [p for p in CLAIMS_PROMPTS[name] if p not in text]
    if missing:
        raise ConfigError(f"the {name} prompt {path} lacks the placeholder(s) {', '.join(missing)}")
    return text


@dataclass(frozen=True)
class ClaimsConfig:
    """Settings of the claims judge."""

    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 512
    max_context_chars: int = 12000
    json_schema: bool = True
    prompt_files: dict[str, str] = field(default_factory=dict)


def reference_text(item: AnswerItem) -> str:
    """The reference answer(s) as one text."""
    return "\n".join(item.references)


@dataclass
class _Job:
    """One request of one item: an extraction (``claims`` None) or a check of ``claims`` against ``premise``."""

    item: int
    key: str
    text: str
    query: str | None = None
    claims: list[str] | None = None


class ClaimsJudge:
    """The LLM claims judge; subclasses replace :meth:`_run_extract` / :meth:`_run_check`."""

    name = "claims"
    uses_llm = True
    baseline = False

    def __init__(self, llm: LLM | None, config: ClaimsConfig | None = None) -> None:
        self.llm = llm
        self.config = config or ClaimsConfig()
        self.previous: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.templates = {n: load_claims_prompt(n, self.config.prompt_files.get(n)) for n in CLAIMS_PROMPTS}

    # ------------------------------------------------------------------ description
    def describe(self) -> JSONObject:
        """Judge model, prompt hashes and settings."""
        assert self.llm is not None
        return {
            "metric": self.name,
            "kind": "claims",
            **llm_record(self.llm, self.config),
            "prompt_sha256": {n: hashlib.sha256(t.encode()).hexdigest() for n, t in self.templates.items()},
            "prompt_files": dict(self.config.prompt_files),
            "temperature": self.config.temperature,
        }

    def fingerprint(self) -> str:
        """Hash of everything that changes a claim or a verdict."""
        d = self.describe()
        key = (
            ABSTENTION_RULE,
            d.get("llm_name"),
            d.get("prompt_sha256"),
            d.get("method"),
            self.config.temperature,
            self.config.seed,
            self.config.max_tokens,
            self.config.max_context_chars,
            *server_identity(d),  # another server's claims are not this one's
        )
        return hashlib.sha256(repr(key).encode()).hexdigest()[:12]

    def missing(self, item: AnswerItem) -> str | None:
        """Claims need a reference answer (passages may be absent: closed book)."""
        return None if item.references else "no reference"

    def remember(self, records: Mapping[tuple[str, str, str], Mapping[str, object]]) -> None:
        """Earlier records (same settings): their requests that did not fail are reused, not re-asked."""
        fp = self.fingerprint()
        self.previous = {(c, i): r for (c, i, m), r in records.items() if m == self.name and r.get("fingerprint") == fp}

    # ------------------------------------------------------------------ requests
    def _request(self, job: _Job) -> GenerationRequest:
        if job.claims is None:
            prompt = self.templates["claims_extract"].replace("{query}", job.query or "").replace("{text}", job.text)
            schema, task = _EXTRACT_SCHEMA, "claims_extract"
        else:
            numbered = "\n".join(f"{n}. {c}" for n, c in enumerate(job.claims, start=1))
            premise = job.text[: self.config.max_context_chars]
            prompt = self.templates["claims_check"].replace("{premise}", premise).replace("{claims}", numbered)
            schema, task = _CHECK_SCHEMA, "claims_check"
        return GenerationRequest(
            messages=(Message("user", prompt),),
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            seed=self.config.seed,
            json_schema=schema if self.config.json_schema else None,
            task=task,
            question=job.query,
            passages=(job.text,),
            meta={"metric": self.name, "part": job.key},
        )

    async def _ask(self, jobs: Sequence[_Job]) -> list[Completion]:
        assert self.llm is not None
        reqs = [self._request(j) for j in jobs]
        comps = await self.llm.agenerate(reqs) if reqs else []
        if len(comps) != len(reqs):
            raise RuntimeError(f"the LLM returned {len(comps)} results for {len(reqs)} requests")
        return comps

    async def _run_extract(self, jobs: Sequence[_Job]) -> list[dict[str, Any]]:
        out = []
        for comp in await self._ask(jobs):
            if not comp.ok:
                out.append({"status": "failed", "error": comp.error or "no text", "attempts": comp.attempts})
                continue
            parsed = parse_claims(
                comp.text, finish_reason=comp.finish_reason, template=self.templates["claims_extract"]
            )
            sub: dict[str, object] = {"status": parsed.status, "raw": comp.text}
            sub.update({"claims": parsed.items} if parsed.status == "ok" else {"note": parsed.note})
            if comp.response_format is not None:  # moved to the record's ``response_formats`` by _phase
                sub["response_format"] = comp.response_format
            out.append(sub)
        return out

    async def _run_check(self, jobs: Sequence[_Job]) -> list[dict[str, Any]]:
        out = []
        for job, comp in zip(jobs, await self._ask(jobs), strict=True):
            assert job.claims is not None
            if not comp.ok:
                out.append({"status": "failed", "error": comp.error or "no text", "attempts": comp.attempts})
                continue
            template = self.templates["claims_check"]
            parsed = parse_verdicts(comp.text, len(job.claims), finish_reason=comp.finish_reason, template=template)
            sub: dict[str, object] = {"status": parsed.status, "raw": comp.text, "n_claims": len(job.claims)}
            sub.update({"verdicts": parsed.items} if parsed.status == "ok" else {"note": parsed.note})
            if comp.response_format is not None:  # moved to the record's ``response_formats`` by _phase
                sub["response_format"] = comp.response_format
            out.append(sub)
        return out

    # ------------------------------------------------------------------ scoring
    def _reuse(self, item: AnswerItem, key: str, claims: list[str] | None = None) -> JSONObject | None:
        prev = self.previous.get(item.key)
        sub = (prev or {}).get("requests", {}).get(key)
        if not isinstance(sub, dict) or sub.get("status") == "failed":
            return None
        if claims is not None and sub.get("checked") != claims:
            return None
        return dict(sub)

    def _previous_format(self, item: AnswerItem, key: str) -> str | None:
        """The response format a reused request was asked with (its earlier record's ``response_formats``)."""
        formats = (self.previous.get(item.key) or {}).get("response_formats")
        fmt = formats.get(key) if isinstance(formats, Mapping) else None
        return str(fmt) if fmt is not None else None

    async def _phase(
        self,
        jobs: list[_Job],
        subs: list[dict[str, JSONObject]],
        items: Sequence[AnswerItem],
        formats: list[dict[str, str]],
    ) -> None:
        todo = []
        for job in jobs:
            reused = self._reuse(items[job.item], job.key, job.claims)
            if reused is not None:
                subs[job.item][job.key] = reused
                if (fmt := self._previous_format(items[job.item], job.key)) is not None:
                    formats[job.item][job.key] = fmt
            elif job.claims is not None and not job.text.strip():  # no evidence entails nothing: no request
                subs[job.item][job.key] = {
                    "status": "ok",
                    "verdicts": [0.0] * len(job.claims),
                    "note": "empty evidence",
                    "checked": job.claims,
                }
            else:
                todo.append(job)
        extract = [j for j in todo if j.claims is None]
        check = [j for j in todo if j.claims is not None]
        for job, sub in zip(extract, await self._run_extract(extract) if extract else [], strict=True):
            _keep_format(formats[job.item], job.key, sub)
            subs[job.item][job.key] = sub
        for job, sub in zip(check, await self._run_check(check) if check else [], strict=True):
            _keep_format(formats[job.item], job.key, sub)
            subs[job.item][job.key] = {**sub, "checked": job.claims}

    async def ascore(self, items: Sequence[AnswerItem]) -> list[JSONObject]:
        """One claims record per item (items must be judgeable: see :meth:`missing`)."""
        from ragrade.judge.abstain import is_abstention

        subs: list[dict[str, JSONObject]] = [{} for _ in items]
        formats: list[dict[str, str]] = [{} for _ in items]  # request key -> response format, per item
        abstained = [is_abstention(it.answer) for it in items]
        first = []
        for n, it in enumerate(items):
            for key, text in (("extract:answer", it.answer or ""), ("extract:reference", reference_text(it))):
                if key == "extract:answer" and abstained[n]:  # a refusal makes no claim: no request
                    subs[n][key] = {"status": "ok", "claims": [], "note": "abstention"}
                elif text.strip():
                    first.append(_Job(n, key, text, it.query))
                else:  # nothing to split: no request
                    subs[n][key] = {"status": "ok", "claims": [], "note": "empty text"}
        await self._phase(first, subs, items, formats)
        second = []
        dry = _is_dry_run(self.llm)
        for n, it in enumerate(items):
            a, g = _claims(subs[n], "extract:answer"), _claims(subs[n], "extract:reference")
            waiting = any(subs[n][k]["status"] == "failed" for k in ("extract:answer", "extract:reference"))
            if dry:  # --dry-run: count the checks as if every sentence were a claim
                a = [] if abstained[n] else _sentences(it.answer or "")
                g, waiting = _sentences(reference_text(it)), False
            if a:
                second.append(_Job(n, "check:reference", reference_text(it), it.query, a))
            if waiting:  # checks of all claims wait until both extractions are in (asked on the rerun)
                continue
            if g and abstained[n]:  # an abstention recalls no reference claim: no request
                subs[n]["check:answer"] = {"status": "ok", "verdicts": [0.0] * len(g), "note": "abstention"}
                subs[n]["check:answer"]["checked"] = g
            elif g:
                second.append(_Job(n, "check:answer", it.answer or "", it.query, g))
            both = (a or []) + (g or [])
            if both:
                second.extend(_Job(n, f"check:passage:{j}", p, it.query, both) for j, p in enumerate(it.contexts, 1))
        await self._phase(second, subs, items, formats)
        return [_record(it, s, ab, f) for it, s, ab, f in zip(items, subs, abstained, formats, strict=True)]

    def score(self, items: Sequence[AnswerItem]) -> list[JSONObject]:
        """Synchronous :meth:`ascore`."""
        return run_sync(self.ascore(items))


def _is_dry_run(llm: LLM | None) -> bool:
    from ragrade.llm.dryrun import DryRunLLM

    return isinstance(llm, DryRunLLM)


def _sentences(text: str) -> list[str]:
    from ragrade.llm.offline import sentences

    return sentences(text)


def _keep_format(formats: dict[str, str], key: str, sub: JSONObject) -> None:
    """Move a fresh request's ``response_format`` out of its sub-record into ``formats``."""
    fmt = sub.pop("response_format", None)
    if fmt is not None:
        formats[key] = str(fmt)


def _claims(subs: Mapping[str, Mapping[str, Any]], key: str) -> list[str] | None:
    sub = subs.get(key) or {}
    return list(sub["claims"]) if sub.get("status") == "ok" else None


def _verdicts(subs: Mapping[str, Mapping[str, Any]], key: str, n: int) -> list[Verdict]:
    sub = subs.get(key)
    if n == 0:
        return []
    if sub is None or sub.get("status") != "ok":
        return [None] * n
    return [None if v is None else float(v) for v in sub["verdicts"]]


def _record(
    item: AnswerItem,
    subs: dict[str, JSONObject],
    abstained: bool = False,
    formats: Mapping[str, str] | None = None,
) -> JSONObject:
    """The metric record of one item from its request results (``abstained``: the answer declines to answer).

    ``formats`` (request key -> how JSON was asked of the server) gives ``response_formats`` and the weakest of
    them, ``response_format`` ("text" beats "json_object" beats "json_schema"; None when no request told).
    """
    statuses = [s["status"] for s in subs.values()]
    counts = {
        "n_requests": len(subs),
        "n_failed": statuses.count("failed"),
        "n_unparsed_requests": statuses.count("unparsed"),
    }
    a, g = _claims(subs, "extract:answer"), _claims(subs, "extract:reference")
    rec: JSONObject = {"claims": {"answer": a, "reference": g}, "requests": subs, "abstained": abstained}
    rec["response_format"] = weakest_format((formats or {}).values())
    if formats:
        rec["response_formats"] = dict(sorted(formats.items()))
    if counts["n_failed"]:
        return {
            **rec,
            "status": "failed",
            "score": None,
            "counts": counts,
            "error": next(s.get("error") for s in subs.values() if s["status"] == "failed"),
        }
    k = len(item.contexts)
    na, ng = len(a or []), len(g or [])
    split = [_verdicts(subs, f"check:passage:{j}", na + ng) for j in range(1, k + 1)]
    avr = _verdicts(subs, "check:reference", na) if a is not None else None
    rva = _verdicts(subs, "check:answer", ng) if g is not None else None
    avp = [row[:na] for row in split] if a is not None else None
    rvp = [row[na:] for row in split] if g is not None else None
    res = claim_metrics(avr, rva, avp, rvp)
    if abstained and res["values"]["recall"] == 0.0:  # no claim, no fact recalled: 2PR/(P+R) = 0 for any P
        res["values"]["f1"] = 0.0
    n_unparsed_verdicts = sum(v is None for seq in [avr or [], rva or [], *(avp or []), *(rvp or [])] for v in seq)
    counts_out: JSONObject = {
        **counts,
        "n_claims_answer": na if a is not None else None,
        "n_claims_reference": ng if g is not None else None,
        "n_unparsed_verdicts": n_unparsed_verdicts,
    }
    known = any(v is not None for v in res["values"].values())
    return {
        **rec,
        "status": "ok" if known else "unparsed",
        "score": res["values"]["f1"],
        "values": res["values"],
        "undetermined": res["undetermined"],
        "counts": counts_out,
    }


__all__ = [
    "ABSTENTION_RULE",
    "CLAIMS_PROMPTS",
    "OFFLINE_JUDGE",
    "ClaimsConfig",
    "ClaimsJudge",
    "load_claims_prompt",
    "reference_text",
]
