"""Run a robustness testbed against one or more LLMs: build, generate, judge, label, summarise.

Output directory (one model)::

    results.jsonl   header + one record per (item, noise ratio, condition): the documents in prompt
                    order with their pools, the requested and actual noise ratio, the response, the
                    labels, the judge verdict, failures
    metrics.json    versioned summary: n, failed, skipped, flagged, untestable, each metric
                    {value, low, high, k, n} overall and per noise ratio (with the mean actual noise
                    ratio), the configuration, the detectors, the warnings
    table.csv       the paper-shaped row of this model, with the actual noise ratio per column
    manifest.json   what ran (kind "robust-run"): configuration, model, data, provenance, status at every exit
    journal.sqlite  resume state: every batch of records, committed as it finishes

With several models each gets ``OUT/<model>/`` and ``OUT/table.csv`` holds one row per model.

Runs resume: every batch of records is committed to ``journal.sqlite`` (the
durable store of :mod:`ragrade.journal`, one fsync'd transaction per batch), so
a run killed at any moment loses at most the batch in flight; a rerun keeps the
journaled records (failed ones, and ones whose documents the current construction
would choose differently, are asked again) and writes ``results.jsonl`` from
them, the file an uninterrupted run writes. A run directory written under
another configuration (data, testbed, model, prompts, construction, ...) is
refused rather than mixed; one from before the journal resumes from its
``results.jsonl``.
Scoring, phrase lists and the judge are applied afterwards, so they may change
between resumes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrade.errors import ConfigError, DataError
from ragrade.io import drop_torn_tail, now_iso, write_json, write_jsonl
from ragrade.journal import JOURNAL_FILE, Journal
from ragrade.llm.options import LLMOptions
from ragrade.outcome import Outcome
from ragrade.provenance import digest
from ragrade.robust.build import BuildOptions, check_min_positives
from ragrade.robust.config import RobustRunConfig
from ragrade.robust.data import RGBData, describe_report, fake_equals_answer, load_rgb
from ragrade.robust.detect import Detectors, build_detectors
from ragrade.robust.match import has_cjk
from ragrade.robust.metrics import FLAGGED_MEANING
from ragrade.robust.prompts import LangPrompts, load_prompts, sentence_warnings
from ragrade.robust.protocol import SharedConstruction, Shortfall
from ragrade.robust.results import (
    RESULTS_KIND,
    RESULTS_VERSION,
    ask_judge,
    ask_model,
    file_sha256,
    read_results,
    resume_plan,
)
from ragrade.robust.table import build_table, render_table, write_table
from ragrade.robust.testbeds import BaseTestbed, Testbed, get_testbed
from ragrade.run.exit_status import recorded_exit
from ragrade.run.manifest import build_manifest, finish_manifest, write_manifest

METRICS_KIND = "robust_metrics"
METRICS_VERSION = 2  # 2: untestable, noise_ratio_differs, min_positives, flagged_means; table actual columns
Progress = Callable[[str, int, int], None]
Warn = Callable[[str], None]


@dataclass
class ModelRun:
    """What one model's run produced."""

    model: str
    out_dir: Path
    metrics: dict[str, Any]
    generated: int
    resumed: int


def resolve_ratios(tb: Testbed, ratios: Sequence[float] | None) -> list[float]:
    """The noise ratios to run (the testbed's defaults when None), validated."""
    if tb.ratios_fixed:
        if ratios is not None and [float(r) for r in ratios] != list(tb.default_ratios):
            raise ConfigError(f"the {tb.name} testbed uses only noise documents; $noise_ratios does not apply")
        return list(tb.default_ratios)
    chosen = [float(r) for r in (ratios if ratios is not None else tb.default_ratios)]
    if not chosen:
        raise ConfigError("$noise_ratios needs at least one value")
    for r in chosen:
        if not 0.0 <= r < 1.0:
            hint = " (use $testbed negative for noise only)" if r == 1.0 else ""
            raise ConfigError(f"noise ratio {r:g} is outside [0, 1){hint}")
    if len(set(chosen)) != len(chosen):
        raise ConfigError("$noise_ratios has duplicates")
    return chosen


def resolve_lang(lang: str, data: RGBData) -> str:
    """``en`` or ``zh``; ``auto`` picks zh when most queries contain CJK characters."""
    if lang != "auto":
        return lang
    cjk = sum(has_cjk(it.query) for it in data.items)
    return "zh" if cjk * 2 > len(data.items) else "en"


def model_slug(name: str) -> str:
    """A directory name for a model spec."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def fingerprint(cfg: RobustRunConfig, model: str, lang: str, lp: LangPrompts, data_sha: str) -> dict[str, Any]:
    """The settings that make a results file's records what they are (a resume must match them)."""
    prompts = json.dumps(lp.__dict__, sort_keys=True, ensure_ascii=False)
    return {
        "data_sha256": data_sha,
        "testbed": cfg.testbed,
        "model": model,
        "lang": lang,
        "docs": cfg.docs,
        "construction": cfg.construction,
        "shortfall": cfg.shortfall,
        "seed": cfg.seed,
        "correct_ratio": cfg.correct_ratio,
        "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens,
        "prompts_sha256": hashlib.sha256(prompts.encode()).hexdigest(),
    }


def label_records(
    records: Sequence[dict[str, Any]],
    scoring: str,
    detectors: Detectors,
    lang: str,
    testbed: str | Testbed | None = None,
) -> None:
    """Attach ``labels`` (the testbed's, under ``scoring``; the shared labels without one) to every
    non-skipped record, in place."""
    tb = BaseTestbed() if testbed is None else get_testbed(testbed)
    for r in records:
        if r.get("skipped"):
            r["labels"] = {}
            continue
        r["labels"] = tb.label(r, scoring, detectors, lang)
        r["scoring"] = scoring


def summarise(
    records: Sequence[dict[str, Any]], testbed: str | Testbed, scoring: str, ratios: Sequence[float], seed: int = 0
) -> dict[str, Any]:
    """Overall and per-ratio metrics of labelled records (the testbed's :meth:`~Testbed.summarise`)."""
    tb = get_testbed(testbed)
    closed = [r for r in records if r["condition"] == "no_documents"]
    overall = tb.summarise(records, scoring, seed)
    by_ratio = []
    for ratio in ratios:
        group = [r for r in records if r["condition"] == "documents" and abs(r["noise_ratio"] - ratio) < 1e-9]
        by_ratio.append({"noise_ratio": ratio, **tb.summarise(group + closed, scoring, seed)})
    return {**overall, "by_noise_ratio": by_ratio}


def record_outcome(record: dict[str, Any]) -> Outcome:
    """What the model's request of one record came to: skipped, failed (with its error) or an answer."""
    if record.get("skipped"):
        return Outcome.skip(str(record["skipped"]))
    if record.get("failed"):
        return Outcome.failure(record.get("error"))
    return Outcome.answer(record.get("response"))


def _failures(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    outcomes = [(r, record_outcome(r)) for r in records]
    return [{"key": r["key"], "error": o.error} for r, o in outcomes if o.failed]


def robust_provenance(fp: dict[str, Any], model_spec: str, options: LLMOptions) -> dict[str, Any]:
    """The provenance (:mod:`ragrade.provenance`) of a robustness run's records: the data and prompts by content,
    the model's identity (its server, seed, extra_body and the other options that change answers), and the
    testbed's settings; throughput (concurrency, timeouts, retries, cache) recorded, not depended on."""
    from ragrade.llm.options import THROUGHPUT_OPTIONS
    from ragrade.provenance import provenance
    from ragrade.run.setup import model_identity

    settings = {k: v for k, v in fp.items() if k not in ("data_sha256", "prompts_sha256", "model")}
    return provenance(
        inputs={"data": fp["data_sha256"], "prompts": fp["prompts_sha256"]},
        models={f"llm {fp['model']}": model_identity(model_spec, options)},
        settings=settings,
        recorded={"throughput": {k: getattr(options, k) for k in THROUGHPUT_OPTIONS}},
    )


class RecordJournal:
    """The run's records in ``journal.sqlite``: every batch one durable commit, a record done unless it failed.

    Opening it decides, with the run's provenance, whether the folder's records may be used (a directory of
    another configuration is refused, naming each difference, old and new) and carries the records of a
    ``results.jsonl`` written before the journal over.
    """

    UNIT = "records"

    def __init__(self, journal: Journal, results: Path, fp: dict[str, Any], prov: dict[str, Any]) -> None:
        self.journal = journal
        ways = f"write to a new $out directory, or delete {results.name} and {JOURNAL_FILE} there to start over"
        journal.check_provenance(prov, "robustness run", extend=False, ways=ways)
        if journal.count() == 0 and journal.count_failed() == 0 and results.is_file():
            drop_torn_tail(results)  # a run ended at once (second Ctrl-C, kill -9) may have left half a line
            _, old_records = read_results(results, fp)
            self.write(list(old_records.values()))

    def records(self) -> dict[str, dict[str, Any]]:
        """The journaled records by key."""
        return {r["key"]: r for r in self.journal.rows(self.UNIT)}

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Commit ``records`` (replacing earlier versions) in one fsync'd transaction."""
        if records:
            self.journal.put(self.UNIT, records, key="key", done=lambda r: not r.get("failed"))


def run_model(
    cfg: RobustRunConfig,
    model_spec: str,
    out_dir: Path,
    *,
    llm: Any = None,
    judge_llm: Any = None,
    progress: Progress | None = None,
    warn: Warn | None = None,
) -> ModelRun:
    """Run one model over the testbed into ``out_dir``; see the module docstring."""
    tb = get_testbed(cfg.testbed)
    data = _load_data(cfg, tb)
    cfg, shortfall_note = resolve_shortfall(cfg, data, tb)
    ratios = resolve_ratios(tb, cfg.noise_ratios)
    lang = resolve_lang(cfg.lang, data)
    prompts = load_prompts(cfg.prompts)
    lp = prompts.lang(lang)
    detectors = build_detectors(
        cfg.rejection_phrases, cfg.error_phrases, always=[lp.rejection_sentence], always_error=[lp.error_sentence]
    )
    shortfall: Shortfall = cfg.shortfall or "pad"
    opts = BuildOptions(cfg.docs, shortfall, cfg.construction, cfg.seed, cfg.correct_ratio, cfg.min_positives)
    instances = tb.build_instances(data.items, ratios, opts, closed_book=cfg.closed_book)
    notes = [*([shortfall_note] if shortfall_note else []), *tb.ratio_notes(instances)]
    if data.meta.get("offline_exam") and not getattr(tb, "noise_only", False):
        from ragrade.robust.corpus import OFFLINE_EXAM_NOTE

        notes.append(OFFLINE_EXAM_NOTE)
    warnings = _warnings(data, lp, lang, cfg, detectors, warn, notes)
    if llm is None:
        from ragrade.llm import create_llm

        llm = create_llm(model_spec, _llm_options(cfg).for_llm(model_spec))
    model = str(getattr(llm, "name", model_spec))
    fp = fingerprint(cfg, model, lang, lp, file_sha256(cfg.data))
    prov = robust_provenance(fp, model_spec, _llm_options(cfg).for_llm(model_spec))
    path = out_dir / "results.jsonl"
    manifest = _manifest(cfg, llm, prov)
    keys = [i.key for i in instances]
    with (
        Journal(out_dir / JOURNAL_FILE) as journal,
        recorded_exit(out_dir, manifest, [RecordJournal.UNIT], keys, files=False, of=len(keys)),
    ):
        sink = RecordJournal(journal, path, fp, prov)
        write_manifest(out_dir, manifest)  # once the journal accepted the run: status running
        records, todo, fresh_skips, resumed = resume_plan(instances, sink.records(), model)
        sink.write(fresh_skips)
        tick = _tracked(progress, len(instances) - len(todo), len(instances), model)
        for rec in ask_model(llm, tb, todo, lp, cfg, model, sink, tick, answering=progress):
            records[rec["key"]] = rec
        if cfg.judge:
            if judge_llm is None:
                from ragrade.llm import create_llm

                judge_llm = create_llm(cfg.judge, _llm_options(cfg, judge=True).for_llm(cfg.judge))
            ask_judge(judge_llm, records, tb, prompts, cfg, sink, progress)
    ordered = [records[i.key] for i in instances]
    untestable = {it.id for it in data.items if fake_equals_answer(it)}
    for r in ordered:
        r["untestable"] = "fake answer equals the answer" if r["item_id"] in untestable else None
    label_records(ordered, cfg.scoring, detectors, lang, tb)
    write_jsonl(
        path,
        ordered,
        kind=RESULTS_KIND,
        version=RESULTS_VERSION,
        meta={"fingerprint": fp, "provenance": prov, "updated": now_iso()},
    )
    metrics = {
        "ragrade": {"kind": METRICS_KIND, "version": METRICS_VERSION},
        "testbed": tb.name,
        "model": model,
        "is_baseline": bool(getattr(llm, "is_baseline", False)),
        "lang": lang,
        "scoring": cfg.scoring,
        "data": str(cfg.data),
        "data_kind": data.kind,
        "n_items": len(data.items),
        "noise_ratios": ratios,
        **_settings(cfg),
        "judge": getattr(judge_llm, "name", cfg.judge) if cfg.judge else None,
        "prompts": prompts.source,
        "detectors": detectors.describe(),
        "llm": _describe(llm),
        **summarise(ordered, tb, cfg.scoring, ratios, seed=cfg.seed),
        "failures": _failures(ordered),
        "provenance": {"digest": digest(prov), **prov},  # what these numbers depend on
        "created": now_iso(),
    }
    metrics.update(skipped_items=_skips(ordered), data_report=data.report, warnings=warnings)
    metrics["table"] = build_table([metrics])
    write_json(out_dir / "metrics.json", metrics)
    write_table(metrics["table"], out_dir / "table.csv")
    finish_manifest(manifest, n_records=len(ordered), n_generated=len(todo), n_failed=len(metrics["failures"]))
    write_manifest(out_dir, manifest)
    return ModelRun(model, out_dir, metrics, generated=len(todo), resumed=resumed)


def _manifest(cfg: RobustRunConfig, llm: Any, prov: dict[str, Any]) -> dict[str, Any]:
    """The run folder's manifest (kind ``robust-run``): the configuration, the model, the data and what the
    records depend on (its status is kept true at every exit by :func:`ragrade.run.exit_status.recorded_exit`)."""
    return build_manifest(
        "robust-run",
        cfg,
        components={"llm": _describe(llm)},
        seeds={"construction": cfg.seed},
        inputs={"data": str(cfg.data)},
        extra={"provenance": prov},
    )


def resolve_shortfall(cfg: RobustRunConfig, data: RGBData, tb: Testbed) -> tuple[RobustRunConfig, str | None]:
    """``cfg`` with its shortfall policy decided, and the line that says so once when it changes what is asked.

    Not given, it is ``fewer`` for a testbed built from the user's corpus (``robust build``): its questions often
    have one or two supporting passages, and padding them with noise up to ``--docs`` gave every requested ratio
    nearly the same documents (ratio 0 was about 0.4 noise), so accuracy could not move with the ratio. Keeping
    every supporting passage and only as much noise as the ratio asks gives the requested ratios (each item as
    near as its passages allow). Other data (the RGB files) keeps ``pad``.
    """
    if cfg.shortfall is not None:
        return cfg, None
    if not data.built_from_corpus:
        return cfg.model_copy(update={"shortfall": "pad"}), None
    resolved = cfg.model_copy(update={"shortfall": "fewer"})
    hooks = tb if isinstance(tb, SharedConstruction) and not tb.noise_only else None
    if hooks is None or cfg.construction != "ragrade":
        return resolved, None
    short = sum(hooks.supporting_passages(item) < cfg.docs for item in data.items)
    if not short:
        return resolved, None
    return resolved, (
        f"{short} of {len(data.items)} questions built from your corpus have fewer than {cfg.docs} supporting "
        "passages: at each noise ratio they get all their passages and the noise share nearest the requested "
        "one, in fewer documents (--shortfall fewer, the default for `robust build` testbeds; --shortfall pad "
        f"fills {cfg.docs} documents with noise, which gives every ratio nearly the same documents)"
    )


def _load_data(cfg: RobustRunConfig, tb: Testbed) -> RGBData:
    """The data file, whose records must be of a shape the testbed accepts, with a question that
    ``--min-positives`` keeps (both checked before anything is asked or written)."""
    data = load_rgb(cfg.data, limit=cfg.limit)
    if data.kind not in tb.data_kinds:
        raise DataError(
            f"{cfg.data}: the {tb.name} testbed needs {' or '.join(tb.data_kinds)} records, "
            f"the file has {data.kind} records"
        )
    source = f"the first {cfg.limit} questions of {cfg.data}" if cfg.limit is not None else str(cfg.data)
    check_min_positives(data.items, tb, cfg.min_positives, source)
    return data


def _settings(cfg: RobustRunConfig) -> dict[str, Any]:
    """The construction settings recorded in metrics.json (in this order)."""
    return {
        "n_docs": cfg.docs,
        "construction": cfg.construction,
        "shortfall": cfg.shortfall,
        "seed": cfg.seed,
        "correct_ratio": cfg.correct_ratio,
        "min_positives": cfg.min_positives,
        "flagged_means": FLAGGED_MEANING,
    }


def _tracked(progress: Progress | None, done: int, total: int, model: str) -> Progress:
    """``progress`` that also tells :mod:`ragrade.interrupt` how many of ``total`` answers are on disk."""
    from ragrade import interrupt

    unit = f"answers of {model}"
    interrupt.progress(done, total, unit)

    def tick(stage: str, n: int, of: int) -> None:
        interrupt.progress(done + n, total, unit)
        if progress is not None:
            progress(stage, n, of)

    return tick


def _llm_options(cfg: RobustRunConfig, judge: bool = False) -> LLMOptions:
    """The run's LLM options; the judge's are the same at ``judge_base_url`` when given."""
    if judge and cfg.judge_base_url:
        return cfg.llm_options.model_copy(update={"base_url": cfg.judge_base_url})
    return cfg.llm_options


def _describe(llm: Any) -> dict[str, Any]:
    try:
        return dict(llm.describe())
    except Exception:  # a description is informative only
        return {"name": str(getattr(llm, "name", ""))}


def _skips(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items left out (id, noise ratio, reason), for metrics.json and the report."""
    return [
        {"id": r["item_id"], "noise_ratio": r["noise_ratio"], "reason": r["skipped"]}
        for r in records
        if r.get("skipped") and r["condition"] == "documents"
    ]


def _warnings(
    data: RGBData,
    lp: LangPrompts,
    lang: str,
    cfg: RobustRunConfig,
    detectors: Detectors,
    warn: Warn | None,
    ratios: Sequence[str] = (),
) -> list[str]:
    """The loader's findings, actual noise ratios off the requested ones and unrecognisable instructed
    sentences, each passed to ``warn`` too."""
    notes = [*describe_report(data), *ratios, *sentence_warnings(lp, lang, cfg.scoring, detectors)]
    if warn is not None:
        for note in notes:
            warn(note)
    return notes


def run_robust(
    cfg: RobustRunConfig,
    *,
    llms: Sequence[Any] | None = None,
    judge_llm: Any = None,
    progress: Progress | None = None,
    warn: Warn | None = None,
) -> tuple[list[ModelRun], dict[str, Any]]:
    """Run every model of ``cfg.llm``; returns the runs and the combined table (written to OUT/table.csv).

    ``warn`` receives each warning (loader findings, unrecognisable prompt sentences) once, before generation.
    """
    if not cfg.llm:
        raise ConfigError("$llm needs at least one model")
    get_testbed(cfg.testbed)  # an unknown --testbed fails before any model is built
    if llms is not None and len(llms) != len(cfg.llm):
        raise ConfigError("one LLM object per $llm spec is needed")
    if llms is None:  # every model spec (and the judge's) is checked before the first model runs
        from ragrade.llm import create_llm

        llms = [create_llm(spec, _llm_options(cfg).for_llm(spec)) for spec in cfg.llm]
        if cfg.judge and judge_llm is None:
            judge_llm = create_llm(cfg.judge, _llm_options(cfg, judge=True).for_llm(cfg.judge))
    from ragrade.runlock import run_lock, stderr_note

    with run_lock(cfg.out, note=warn or stderr_note):  # one process per output folder
        runs = _run_each(cfg, llms, judge_llm, progress, warn)
        table = build_table([r.metrics for r in runs])
        if len(cfg.llm) > 1:
            write_table(table, cfg.out / "table.csv")
    return runs, table


def _run_each(
    cfg: RobustRunConfig, llms: Sequence[Any], judge_llm: Any, progress: Progress | None, warn: Warn | None
) -> list[ModelRun]:
    runs = []
    single = len(cfg.llm) == 1
    for i, spec in enumerate(cfg.llm):
        out_dir = cfg.out if single else cfg.out / model_slug(spec)
        runs.append(
            run_model(
                cfg,
                spec,
                out_dir,
                llm=llms[i] if llms else None,
                judge_llm=judge_llm,
                progress=progress,
                warn=warn if i == 0 else None,
            )
        )
    return runs


__all__ = [
    "METRICS_KIND",
    "METRICS_VERSION",
    "RESULTS_KIND",
    "RESULTS_VERSION",
    "ModelRun",
    "RecordJournal",
    "RobustRunConfig",
    "fingerprint",
    "label_records",
    "model_slug",
    "read_results",
    "record_outcome",
    "render_table",
    "resolve_lang",
    "resolve_ratios",
    "robust_provenance",
    "run_model",
    "run_robust",
    "summarise",
]
