"""Judging a file of answers: resumable scoring, screening, summaries and agreement.

Output directory::

    manifest.json     what ran (kind "judge"): config, judges, input fingerprint, software
    scores.jsonl      one record per answer x metric (kind "judge_scores"), with status
                      ok / unparsed / failed / skipped, raw judge text and errors kept
    summary.json      per configuration and metric: counts, statistics with 95% intervals,
                      self-consistency, the screening decision, and per LLM-judged metric the rows
                      per response format the judge was asked with (kind "judge_summary")
    summary.csv       the same statistics in long format (one row per config x metric x statistic)
    agreement.json    Spearman / Cohen's kappa between metrics, per configuration and pooled
    journal.sqlite    resume state: every batch of score records, committed as it finishes

Resume: every batch of score records is committed to ``journal.sqlite`` (the
durable store of :mod:`ragrade.journal`, one fsync'd transaction per batch), and
``scores.jsonl`` is written from it at the end, so a run killed at any moment
keeps its finished batches. Records made with the same settings (same
fingerprint) are kept and not re-judged; ``failed`` records (request errors) are
retried. A directory from before the journal resumes from its ``scores.jsonl``.

Screening (``screen_top=k``, the seed 003 workflow): the cheap metrics run on
every configuration, configurations are ranked by mean BERTScore F1 (or
token F1), and the LLM judges run only on the answers of the top ``k``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragrade import interrupt
from ragrade.errors import BackendError, ConfigError, DataError
from ragrade.io import file_in_folder, read_jsonl, write_json, write_jsonl
from ragrade.journal import JOURNAL_FILE, Journal
from ragrade.judge.inputs import AnswerItem, read_answers
from ragrade.llm.options import LLMOptions, lift_flat_options
from ragrade.outcome import Outcome
from ragrade.progress import counting_requests, note_failed

SCORES_KIND = "judge_scores"
SCORES_VERSION = 1
SCORES_FILE = "scores.jsonl"
SUMMARY_FILE = "summary.json"
SUMMARY_CSV = "summary.csv"
AGREEMENT_FILE = "agreement.json"
MANIFEST_KIND = "judge"

Progress = Callable[[str, int, int], None]  # (metric, done, total)


class JudgeSettings(BaseModel):
    """How answers are judged: the metrics, the judge LLM and its sampling, screening, BERTScore. Shared by
    ``ragrade judge`` (:class:`JudgeRunConfig`) and the ``[judge]`` table of a ``ragrade run`` job config."""

    model_config = ConfigDict(extra="forbid")

    metrics: list[str] = Field(default_factory=lambda: ["bertscore", "exact"])
    llm: str | None = None  # the judge LLM (LLM-judged metrics)
    fields: dict[str, str] = Field(default_factory=dict)
    samples: int = Field(1, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    sample_temperature: float = Field(0.7, gt=0.0, description="judge temperature when samples > 1, temperature 0")
    seed: int = 0
    max_tokens: int = Field(256, ge=1, description="reply budget of a judge request (claims: at least 512)")
    max_context_chars: int = Field(
        12000, ge=100, description="an LLM judge sees the passages cut at this many characters (claims: the premise)"
    )
    json_schema: bool = Field(
        default=True, description="ask the judge LLM for structured JSON output (false: plain text, parsed tolerantly)"
    )
    prompts: dict[str, str] = Field(default_factory=dict)
    screen_top: int | None = Field(None, ge=1)
    screen_metric: Literal["bertscore", "exact"] = Field(
        default="bertscore", description="with screen_top: the metric whose mean F1 ranks the configurations"
    )
    bertscore_model: str = "minilm"
    bertscore_layer: int | None = Field(None, ge=1)
    bertscore_idf: bool = False
    pass_threshold: float = Field(4.0, ge=1.0, le=5.0)
    batch_size: int = Field(64, ge=1)
    n_boot: int = Field(2000, ge=100, description="bootstrap resamples of the non-binary statistics' 95% intervals")


class JudgeRunConfig(JudgeSettings):
    """Everything ``ragrade judge`` can be told (CLI flags or a ``[judge]`` table of a config file)."""

    # how the judge LLM is reached; `ragrade --dry-run judge` sets dry_run (count the requests, send none)
    llm_options: LLMOptions = Field(default_factory=LLMOptions)

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, data: object) -> object:
        return lift_flat_options(data, "[judge]")


def resolve_answers_path(path: str | Path) -> Path:
    """A run directory means its ``answers.jsonl``; anything else must be a file."""
    return file_in_folder(path, "answers.jsonl", "give the answers file itself")


def _check_out_dir(out: Path) -> None:
    manifest = out / "manifest.json"
    if manifest.is_file():
        from ragrade.io import read_json

        kind = (read_json(manifest) or {}).get("kind")
        if kind not in (None, MANIFEST_KIND):
            raise ConfigError(f"{out} holds a '{kind}' run; write the judge output to a subfolder (e.g. {out}/judge)")


def check_judge_settings(cfg: JudgeSettings) -> None:
    """ConfigError for judge settings that cannot run: unknown or repeated metrics, an LLM-judged metric without
    a judge LLM (or with one that cannot judge it), screening on a metric not computed, unusable prompt files.
    ``judge`` checks its config with it before the first answer; ``ragrade run --check`` the ``[judge]`` table."""
    from ragrade.judge import LLM_METRICS
    from ragrade.registry import lookup

    if not cfg.metrics:
        raise ConfigError("$metrics needs at least one metric")
    for m in cfg.metrics:
        lookup("judge", m)  # did-you-mean error for unknown names
    if len(set(cfg.metrics)) != len(cfg.metrics):
        raise ConfigError(f"$metrics repeats a metric: {','.join(cfg.metrics)}")
    check_judge_llm(cfg.metrics, cfg.llm)
    if any(m in LLM_METRICS for m in cfg.metrics) and not cfg.llm:
        raise ConfigError(
            "LLM-judged metrics ("
            + ", ".join(m for m in cfg.metrics if m in LLM_METRICS)
            + ") need $llm PROVIDER/MODEL"
        )
    if cfg.screen_top is not None and cfg.screen_metric not in cfg.metrics:
        raise ConfigError(f"$screen_top ranks configurations by {cfg.screen_metric}; add it to $metrics")
    from ragrade.judge.claims import CLAIMS_PROMPTS, load_claims_prompt
    from ragrade.judge.llm_judges import SPECS, load_prompt

    unknown = set(cfg.prompts) - set(SPECS) - set(CLAIMS_PROMPTS)
    if unknown:
        raise ConfigError(
            f"$prompts given for {', '.join(sorted(unknown))}; prompts exist for {', '.join([*SPECS, *CLAIMS_PROMPTS])}"
        )
    for metric, prompt_path in cfg.prompts.items():  # unreadable file or missing placeholders: fail before any call
        load_claims_prompt(metric, prompt_path) if metric in CLAIMS_PROMPTS else load_prompt(SPECS[metric], prompt_path)


def check_judge_llm(metrics: Sequence[str], llm: str | None) -> None:
    """ConfigError when ``llm`` cannot judge the LLM-judged ``metrics``: ``offline/judge`` (the offline claims
    baseline) serves claims only; the other offline baselines and ``replay/`` write no judgement at all
    (offline/student answers multiple-choice questions only, offline/extractive replies with a passage sentence)."""
    from ragrade.judge import LLM_METRICS
    from ragrade.judge.claims import OFFLINE_JUDGE

    judged = [m for m in metrics if m in LLM_METRICS]
    if not llm or not judged:
        return
    if llm == OFFLINE_JUDGE:
        others = [m for m in judged if m != "claims"]
        if others:
            raise ConfigError(
                f"$llm {OFFLINE_JUDGE} is the offline claims baseline; {', '.join(others)} need(s) a real judge LLM"
            )
        return
    if llm.split("/", 1)[0] in ("offline", "replay"):
        hint = f", or {OFFLINE_JUDGE} (the offline claims baseline) for claims" if "claims" in judged else ""
        raise ConfigError(
            f"$llm {llm} cannot judge {', '.join(judged)}: offline baselines and replays write no judgement (no "
            f"claims, no grades); give a generating LLM (openai/..., hf/..., llamacpp/...){hint}"
        )


def check_reachable(llm: Any, timeout: float = 10.0) -> None:
    """BackendError (exit 2) when the judge LLM's server refuses the connection (or none opens in ``timeout``
    seconds), before the first answer is judged; a server that accepts it is left to the requests' retries.
    No check for in-process models, dry runs, the default OpenAI endpoint or a host reached through a proxy."""
    import socket
    import urllib.parse
    import urllib.request

    root = getattr(llm, "server_root", None)
    if not isinstance(root, str):
        return
    parts = urllib.parse.urlsplit(root)
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ConfigError(f"$base_url {root}: {exc}") from exc
    direct = host in ("localhost", "127.0.0.1", "::1") or urllib.request.proxy_bypass(host or "")
    if not host or (urllib.request.getproxies() and not direct):
        return
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise BackendError(
            f"the judge LLM {getattr(llm, 'name', '')} is unreachable at {root} ({why}); "
            "start the server or fix $base_url"
        ) from exc


def build_judges(cfg: JudgeRunConfig) -> dict[str, Any]:
    """Create the judges named in ``cfg.metrics`` (LLM created once and shared)."""
    from ragrade.judge import LLM_METRICS
    from ragrade.judge.bertscore import BertScoreConfig
    from ragrade.judge.claims import OFFLINE_JUDGE
    from ragrade.judge.judges import JudgeSettings
    from ragrade.judge.llm_judges import LLMJudgeConfig
    from ragrade.registry import create

    llm = None
    if any(m in LLM_METRICS for m in cfg.metrics) and cfg.llm != OFFLINE_JUDGE:
        from ragrade.llm import create_llm

        assert cfg.llm is not None
        llm = create_llm(cfg.llm, options=cfg.llm_options)
    settings = JudgeSettings(
        llm_judge=LLMJudgeConfig(
            samples=cfg.samples,
            temperature=cfg.temperature,
            sample_temperature=cfg.sample_temperature,
            seed=cfg.seed,
            max_tokens=cfg.max_tokens,
            max_context_chars=cfg.max_context_chars,
            json_schema=cfg.json_schema,
        ),
        prompt_files=dict(cfg.prompts),
        bertscore=BertScoreConfig(
            model=cfg.bertscore_model,
            num_layers=cfg.bertscore_layer,
            idf=cfg.bertscore_idf,
            batch_size=min(cfg.batch_size, 64),
        ),
    )
    return {m: create("judge", m, settings=settings, llm=llm) for m in cfg.metrics}


ScoreKey = tuple[str, str, str]  # (config, id, metric)


def _score_key(rec: Mapping[str, Any]) -> ScoreKey:
    return (str(rec["config"]), str(rec["id"]), str(rec["metric"]))


def _journal_item(key: ScoreKey) -> str:
    return json.dumps(key, ensure_ascii=False)


def _reusable_status(rec: Mapping[str, Any]) -> bool:
    return rec.get("status") not in ("failed", "skipped")


class ScoreStore:
    """The records of ``scores.jsonl``, keyed by (config, id, metric).

    :meth:`save` commits the records put since the last save to ``journal.sqlite`` next to ``path`` (one durable
    transaction; a failed or skipped record is kept but not done), :meth:`write` writes ``scores.jsonl`` from them.
    """

    UNIT = "scores"

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self.meta = meta
        self.records: dict[ScoreKey, dict[str, Any]] = {}
        self._pending: dict[ScoreKey, dict[str, Any]] = {}
        self.journal = Journal(path.parent / JOURNAL_FILE)
        for r in self.journal.rows(self.UNIT):
            self.records[_score_key(r)] = r
        if not self.records and path.is_file():  # a directory scored before the journal: carry its records over
            header, recs = read_jsonl(path, kind=SCORES_KIND)
            if header is not None and header.version > SCORES_VERSION:
                raise DataError(f"{path}: written by a newer ragrade (version {header.version})")
            for r in recs:
                self.put(r)
            self.save()

    def close(self) -> None:
        """Close the journal."""
        self.journal.close()

    def done(self, item: AnswerItem, metric: str, fingerprint: str) -> bool:
        """True when a reusable record exists (same settings, neither a request failure nor a skipped answer)."""
        rec = self.records.get((item.config, item.id, metric))
        if rec is None or rec.get("status") in ("failed", "skipped"):  # a skip is re-checked: the failed
            return False  # answer behind it may have been asked again since
        return bool(rec.get("fingerprint") == fingerprint)

    def put(self, rec: dict[str, Any]) -> None:
        """Add or replace one record (in the journal at the next :meth:`save`)."""
        self.records[_score_key(rec)] = self._pending[_score_key(rec)] = rec

    def prune(self, keys: set[tuple[str, str]]) -> int:
        """Drop records of answers no longer in the input (from the journal too); returns how many were dropped."""
        stale = [k for k in self.records if (k[0], k[1]) not in keys]
        for k in stale:
            del self.records[k]
            self._pending.pop(k, None)
        if stale:
            self.journal.delete(self.UNIT, [_journal_item(k) for k in stale])
        return len(stale)

    def save(self) -> None:
        """Commit the records put since the last save (one fsync'd transaction)."""
        if self._pending:
            recs = list(self._pending.values())
            self.journal.put(self.UNIT, recs, key=lambda r: _journal_item(_score_key(r)), done=_reusable_status)
            self._pending.clear()

    def write(self) -> None:
        """Commit what is pending, then write every record to ``scores.jsonl``, sorted, atomically."""
        self.save()
        recs = [self.records[k] for k in sorted(self.records)]
        write_jsonl(self.path, recs, kind=SCORES_KIND, version=SCORES_VERSION, meta=self.meta)


def _base(item: AnswerItem, metric: str, fingerprint: str) -> dict[str, Any]:
    return {"config": item.config, "id": item.id, "metric": metric, "fingerprint": fingerprint, "line": item.line}


def answer_outcome(item: AnswerItem) -> Outcome:
    """What the answering stage's request came to: a failure (the answer's error) or an answer (maybe none)."""
    return Outcome.failure(item.error) if item.error else Outcome.answer(item.answer)


def _skip_reason(item: AnswerItem, judge: Any) -> str | None:
    answer = answer_outcome(item)
    if answer.failed:  # a failed answer is missing: the judge skips it, never scores it as wrong
        return f"answer error: {answer.reason}"
    if answer.value is None:
        return "no answer"
    reason: str | None = judge.missing(item)
    return reason


def score_metric(
    judge: Any, items: Sequence[AnswerItem], store: ScoreStore, *, batch_size: int, progress: Progress | None = None
) -> dict[str, int]:
    """Score ``items`` with one judge, skipping reusable records; saves after every batch.

    ``progress(judge, scored, to score)`` before the first batch, after each, and while one runs as its LLM
    requests are answered (one per answer, at most the batch: a judge asking several per answer reaches the
    batch's end early and waits there).
    """
    fp = judge.fingerprint()
    todo: list[AnswerItem] = []
    counts = {"reused": 0, "skipped": 0, "scored": 0}
    for item in items:
        if store.done(item, judge.name, fp):
            counts["reused"] += 1
            continue
        reason = _skip_reason(item, judge)
        if reason is not None:
            store.put({**_base(item, judge.name, fp), "status": "skipped", "skip_reason": reason})
            counts["skipped"] += 1
            continue
        todo.append(item)
    total = len(todo)
    interrupt.progress(len(items) - total, len(items), f"{judge.name} scores")
    if progress is not None and total:
        progress(judge.name, 0, total)
    for start in range(0, total, batch_size):
        batch = todo[start : start + batch_size]
        live = None if progress is None else partial(_scored, progress, judge.name, start, total)
        with counting_requests(live, cap=len(batch)):
            bodies = judge.score(batch)
        for item, body in zip(batch, bodies, strict=True):
            store.put({**_base(item, judge.name, fp), **body})
        note_failed(sum(1 for body in bodies if body.get("status") == "failed"))
        counts["scored"] += len(batch)
        store.save()
        interrupt.progress(len(items) - total + counts["scored"], len(items), f"{judge.name} scores")
        if progress is not None:
            progress(judge.name, min(start + batch_size, total), total)
    if counts["skipped"] and not total:
        store.save()
    return counts


def _scored(progress: Progress, name: str, start: int, total: int, answered: int) -> None:
    progress(name, start + answered, total)


def screen(store: ScoreStore, configs: Sequence[str], metric: str, top: int) -> dict[str, Any]:
    """Rank configurations by the mean of the screening metric; the top ``top`` are judged."""
    path = "f1"
    ranking = []
    for config in configs:
        vals = [
            float(r["values"][path])
            for (c, _, m), r in store.records.items()
            if c == config and m == metric and r.get("status") == "ok"
        ]
        ranking.append({"config": config, "mean": sum(vals) / len(vals) if vals else None, "n": len(vals)})
    ranking.sort(key=lambda r: (r["mean"] is None, -float(r["mean"] or 0.0), str(r["config"])))
    selected = [r["config"] for r in ranking[:top] if r["mean"] is not None]
    return {"metric": f"{metric}.{path}", "top": top, "ranking": ranking, "selected": selected}


def request_failures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """LLM judge requests per ``config / metric``: ``{"groups": {group: [failed, asked]}, "errors": [...]}``.

    A failed request (every sample failed) is missing, never a verdict; a rerun asks it again.
    """
    from ragrade.judge import LLM_METRICS

    groups: dict[str, list[int]] = {}
    errors: list[str] = []
    for r in records:
        outcome = score_outcome(r)
        if outcome.skipped or r.get("metric") not in LLM_METRICS:
            continue  # skipped answers and metrics computed here (exact, BERTScore) send no judge request
        g = groups.setdefault(f"{r['config']} / {r['metric']}", [0, 0])
        g[1] += 1
        if outcome.failed:
            g[0] += 1
            if outcome.reason not in errors:
                errors.append(str(outcome.reason))
    return {"groups": groups, "errors": errors[:20]}


def score_outcome(rec: Mapping[str, Any]) -> Outcome:
    """What one score record's judging came to: skipped (why), failed (the first request error: a sample's, or
    the record's for claims) or an answer (a score or an unparsed reply: the judgement is the record's)."""
    status = rec.get("status")
    if status == "failed":
        errs = [str(s.get("error")) for s in rec.get("samples") or [] if s.get("error")]
        return Outcome.failure(errs[0] if errs else str(rec.get("error") or "failed"))
    if status not in ("ok", "unparsed"):
        return Outcome.skip(str(rec.get("skip_reason") or status or "skipped"))
    return Outcome.answer(None)


def response_format_counts(records: Sequence[dict[str, Any]], metric: str) -> dict[str, int]:
    """Score rows of ``metric`` per response format their judge requests were asked with (the weakest, for rows
    made of several requests): ``{"json_schema": 18, "text": 2}``; rows that tell none are not counted."""
    counts: dict[str, int] = {}
    for r in records:
        fmt = r.get("response_format") if r.get("metric") == metric else None
        if fmt is not None:
            counts[str(fmt)] = counts.get(str(fmt), 0) + 1
    return dict(sorted(counts.items()))


def check_judge_failures(summary: dict[str, Any], max_failed: float | None, resume: str | None = None) -> None:
    """Raise BackendError (exit 2) / FailedRequests (exit 3) when the judge requests of ``summary`` failed beyond
    the threshold (per configuration and metric, see :mod:`ragrade.llm.failures`); call it after the files are written.
    """
    from ragrade.llm.failures import FailureTally, fatal_kind, resume_hint

    info = summary.get("request_failures") or {}
    errors = list(info.get("errors") or [])
    fatal = next((e for e in errors if fatal_kind(e)), None)
    error = fatal or (errors[0] if errors else "failed")
    tally = FailureTally()
    for group, (failed, asked) in (info.get("groups") or {}).items():
        for i in range(asked):
            tally.add(group, "the judge LLM", error if i < failed else None)
    tally.check(resume or resume_hint(), max_failed, what="configuration")


def _score_all(
    store: ScoreStore, judges: dict[str, Any], items: list[AnswerItem], cfg: JudgeRunConfig, progress: Progress | None
) -> tuple[int, dict[str, dict[str, int]], dict[str, Any] | None, list[AnswerItem]]:
    """Score every metric into ``store``: (stale records dropped, counts per metric, screening, items judged)."""
    from ragrade.judge import LLM_METRICS

    dropped = store.prune({it.key for it in items})
    for judge in judges.values():
        if hasattr(judge, "remember"):  # reuse the requests of earlier partial records (claims)
            judge.remember(store.records)
    runs: dict[str, dict[str, int]] = {}
    for m in [m for m in cfg.metrics if m not in LLM_METRICS]:
        runs[m] = score_metric(judges[m], items, store, batch_size=cfg.batch_size, progress=progress)
    screening = None
    judged_items = items
    if cfg.screen_top is not None:
        screening = screen(store, sorted({it.config for it in items}), cfg.screen_metric, cfg.screen_top)
        chosen = set(screening["selected"])
        judged_items = [it for it in items if it.config in chosen]
    for m in [m for m in cfg.metrics if m in LLM_METRICS]:
        runs[m] = score_metric(judges[m], judged_items, store, batch_size=cfg.batch_size, progress=progress)
    return dropped, runs, screening, judged_items


def run_judging(
    answers: str | Path, out_dir: str | Path, cfg: JudgeRunConfig, progress: Progress | None = None
) -> dict[str, Any]:
    """Judge every answer of ``answers`` with ``cfg.metrics``; write the output files; return the summary."""
    check_judge_settings(cfg)
    path = resolve_answers_path(answers)
    items = read_answers(path, cfg.fields)
    out = Path(out_dir)
    _check_out_dir(out)
    judges = build_judges(cfg)  # bad model spec or options: fail before writing anything
    for llm in {id(j.llm): j.llm for j in judges.values() if getattr(j, "llm", None) is not None}.values():
        # a server that is not there: exit 2 before the first item
        check_reachable(llm, min(10.0, cfg.llm_options.timeout))
    from ragrade.runlock import run_lock

    with run_lock(out):  # one process per output folder
        return _judge_locked(path, out, cfg, items, judges, progress)


def _provenance(path: Path, judges: Mapping[str, Any], cfg: JudgeRunConfig) -> dict[str, Any]:
    """What the verdicts depend on (:mod:`ragrade.provenance`): the answers by content and each metric's judge by
    its fingerprint (model, server, prompt, sampling). A rerun re-judges exactly the records whose judge changed
    (each record keeps the fingerprint it was judged under), so a verdict is never reused across judges."""
    from ragrade.llm.options import THROUGHPUT_OPTIONS
    from ragrade.provenance import provenance
    from ragrade.run.manifest import file_fingerprint

    return provenance(
        inputs={"answers": file_fingerprint(path).get("sha256")},
        grid={m: {"fingerprint": j.fingerprint()} for m, j in judges.items()},
        recorded={"throughput": {k: getattr(cfg.llm_options, k) for k in THROUGHPUT_OPTIONS}},
    )


def _judge_locked(
    path: Path,
    out: Path,
    cfg: JudgeRunConfig,
    items: list[AnswerItem],
    judges: dict[str, Any],
    progress: Progress | None,
) -> dict[str, Any]:
    """The judging of :func:`run_judging` in a folder this process holds."""
    from ragrade.judge import LLM_METRICS
    from ragrade.judge.summary import CSV_COLUMNS, agreement, csv_rows, summarise
    from ragrade.run.manifest import build_manifest, finish_manifest, write_manifest
    from ragrade.run.summary import write_csv_rows

    out.mkdir(parents=True, exist_ok=True)
    for judge in judges.values():
        if hasattr(judge, "prepare"):
            judge.prepare(items)
    manifest = build_manifest(
        MANIFEST_KIND,
        cfg.model_dump(),
        components={f"judge:{m}": j.describe() for m, j in judges.items()},
        seeds={"judge": cfg.seed},
        inputs={"answers": str(path)},
        extra={"provenance": _provenance(path, judges, cfg)},
    )
    write_manifest(out, manifest)
    configs = sorted({it.config for it in items})
    costly = [m for m in cfg.metrics if m in LLM_METRICS]
    store = ScoreStore(out / SCORES_FILE, meta={"answers": str(path)})
    try:
        dropped, runs, screening, judged_items = _score_all(store, judges, items, cfg, progress)
        store.write()
    finally:
        store.close()
    records = [store.records[k] for k in sorted(store.records)]  # one order, resumed or not
    per_config = summarise(records, pass_threshold=cfg.pass_threshold, n_boot=cfg.n_boot, seed=cfg.seed)
    totals = {
        m: {
            s: sum(1 for r in records if r["metric"] == m and r.get("status") == s)
            for s in ("ok", "unparsed", "failed", "skipped")
        }
        for m in cfg.metrics
    }
    summary = {
        "kind": "judge_summary",
        "version": 1,
        "answers": str(path),
        "n_answers": len(items),
        "configs": per_config,
        "totals": totals,
        "runs": runs,
        "dropped_stale": dropped,
        "judges": {m: j.describe() for m, j in judges.items()},
        "screening": screening,
        "not_judged": sorted(set(configs) - {it.config for it in judged_items}) if costly else [],
        "request_failures": request_failures(records),
        "response_format": {m: response_format_counts(records, m) for m in costly},
    }
    write_json(out / SUMMARY_FILE, summary)
    write_csv_rows(out / SUMMARY_CSV, csv_rows(per_config), CSV_COLUMNS)
    write_json(out / AGREEMENT_FILE, agreement(records, pass_threshold=cfg.pass_threshold))
    n_unparsed = sum(t["unparsed"] for t in totals.values())
    n_failed = sum(t["failed"] for t in totals.values())
    write_manifest(out, finish_manifest(manifest, n_answers=len(items), n_unparsed=n_unparsed, n_failed=n_failed))
    return summary


__all__ = [
    "JudgeRunConfig",
    "JudgeSettings",
    "ScoreStore",
    "check_judge_failures",
    "check_judge_llm",
    "check_judge_settings",
    "check_reachable",
    "resolve_answers_path",
    "response_format_counts",
    "run_judging",
    "score_metric",
    "score_outcome",
    "screen",
]
