"""Run a robustness testbed against one or more LLMs: build, generate, judge, label, summarise.

Output directory (one model)::

    results.jsonl   header + one record per (item, noise ratio, condition): the documents in prompt
                    order with their pools, the response, the labels, the judge verdict, failures
    metrics.json    versioned summary: n, failed, skipped, each metric {value, low, high, k, n}
                    overall and per noise ratio, the configuration, the detectors
    table.csv       the paper-shaped row of this model

With several models each gets ``OUT/<model>/`` and ``OUT/table.csv`` holds one row per model.

Runs resume: records already in ``results.jsonl`` are kept (failed ones are
retried) and the file is appended to after every batch, so an interrupted run
loses at most one batch. A results file written under another configuration
(data, testbed, model, prompts, construction, ...) is refused rather than mixed.
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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ragrade.errors import ConfigError, DataError
from ragrade.io import drop_torn_tail, dumps_line, header_record, iter_jsonl, now_iso, write_json, write_jsonl
from ragrade.robust.build import BuildOptions, Instance, build_instance
from ragrade.robust.data import RGBData, describe_report, load_rgb
from ragrade.robust.detect import Detectors, build_detectors, parse_verdict
from ragrade.robust.match import has_cjk
from ragrade.robust.metrics import label_response, summarise_default
from ragrade.robust.prompts import (
    JUDGE_SCHEMA,
    LangPrompts,
    PromptSet,
    answer_messages,
    judge_prompt,
    load_prompts,
    sentence_warnings,
)
from ragrade.robust.rgb_scoring import rgb_label_response, summarise_rgb
from ragrade.robust.table import build_table, render_table, write_table
from ragrade.robust.testbeds import Testbed, get_testbed

RESULTS_KIND = "robust_results"
RESULTS_VERSION = 1
METRICS_KIND = "robust_metrics"
METRICS_VERSION = 1
Progress = Callable[[str, int, int], None]
Warn = Callable[[str], None]
JUDGE_MAX_TOKENS = 128  # the judge's reply: a yes/no verdict and a short reason, as JSON


class RobustRunConfig(BaseModel):
    """Everything ``ragrade robust run`` needs (CLI flags and config files fill it)."""

    model_config = ConfigDict(extra="forbid")

    data: Path
    testbed: str
    llm: list[str]
    out: Path
    base_url: str | None = None
    noise_ratios: list[float] | None = None
    docs: int = 5
    lang: Literal["auto", "en", "zh"] = "auto"
    scoring: Literal["default", "rgb"] = "default"
    construction: Literal["ragrade", "rgb"] = "ragrade"
    shortfall: Literal["pad", "skip"] = "pad"
    seed: int = 0
    correct_ratio: float = 0.0
    closed_book: bool = True
    judge: str | None = None
    judge_base_url: str | None = None
    prompts: Path | None = None
    rejection_phrases: list[str] | None = None
    error_phrases: list[str] | None = None
    max_tokens: int = 256
    temperature: float = 0.0
    limit: int | None = None
    batch_size: int = 32
    concurrency: int = 16
    cache: bool = True
    timeout: float = 60.0
    max_retries: int = 5


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
            raise ConfigError(f"the {tb.name} testbed uses only noise documents; --noise-ratios does not apply")
        return list(tb.default_ratios)
    chosen = [float(r) for r in (ratios if ratios is not None else tb.default_ratios)]
    if not chosen:
        raise ConfigError("--noise-ratios needs at least one value")
    for r in chosen:
        if not 0.0 <= r < 1.0:
            hint = " (use --testbed negative for noise only)" if r == 1.0 else ""
            raise ConfigError(f"noise ratio {r:g} is outside [0, 1){hint}")
    if len(set(chosen)) != len(chosen):
        raise ConfigError("--noise-ratios has duplicates")
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


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint(cfg: RobustRunConfig, model: str, lang: str, lp: LangPrompts, data_sha: str) -> dict[str, Any]:
    """The settings that make a results file's records what they are (a resume must match them)."""
    prompts = json.dumps(lp.__dict__, sort_keys=True, ensure_ascii=False)
    return {
        "data_sha256": data_sha, "testbed": cfg.testbed, "model": model, "lang": lang, "docs": cfg.docs,
        "construction": cfg.construction, "shortfall": cfg.shortfall, "seed": cfg.seed,
        "correct_ratio": cfg.correct_ratio, "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
        "prompts_sha256": hashlib.sha256(prompts.encode()).hexdigest(),
    }


def read_results(path: Path, expected: dict[str, Any] | None = None) -> tuple[dict[str, Any] | None,
                                                                              dict[str, dict[str, Any]]]:
    """The header and the latest record per key of a results file (later lines win)."""
    if not path.exists():
        return None, {}
    header: dict[str, Any] | None = None
    records: dict[str, dict[str, Any]] = {}
    for lineno, rec in iter_jsonl(path):
        if lineno == 1 and isinstance(rec.get("ragrade"), dict):
            header = rec["ragrade"]
            if header.get("kind") != RESULTS_KIND:
                raise DataError(f"{path}: not a robustness results file (kind '{header.get('kind')}')")
            continue
        if "key" not in rec:
            raise DataError(f"{path}:{lineno}: record without 'key'")
        records[rec["key"]] = rec
    if expected is not None and header is not None:
        got = header.get("fingerprint") or {}
        diff = sorted(k for k in expected if got.get(k) != expected[k])
        if diff:
            raise ConfigError(f"{path} holds results of another configuration (differs in: {', '.join(diff)}); "
                              "use another --out or delete the file")
    return header, records


def _base_record(inst: Instance, model: str) -> dict[str, Any]:
    item = inst.item
    rec: dict[str, Any] = {
        "key": inst.key, "item_id": item.id, "testbed": inst.testbed, "condition": inst.condition,
        "model": model, "noise_ratio": inst.noise_ratio, "noise_ratio_actual": inst.noise_ratio_actual,
        "n_docs": len(inst.docs), "n_positive": inst.n_positive, "n_noise": inst.n_noise,
        "doc_order": [f"{d.pool}:{d.index}" for d in inst.docs],
        "documents": [d.to_record() for d in inst.docs], "flags": list(inst.flags), "skipped": inst.skipped,
        "system_prompt": inst.system_prompt,
        "query": item.query, "answer": [list(p) for p in item.answer],
    }
    if item.fakeanswer:
        rec["fakeanswer"] = [list(p) for p in item.fakeanswer]
    return rec


def _request(inst: Instance, lp: LangPrompts, cfg: RobustRunConfig) -> Any:
    from ragrade.llm.base import GenerationRequest, Message

    texts = [d.text for d in inst.docs]
    docs = None if inst.condition == "no_documents" else texts
    pairs = answer_messages(lp, inst.item.query, docs, system=inst.system_prompt)
    messages = tuple(Message(role, content) for role, content in pairs)
    return GenerationRequest(messages=messages, temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                             seed=cfg.seed, question=inst.item.query, passages=tuple(texts), task="answer",
                             meta={"key": inst.key})


class _Appender:
    """Appends records to the results file, writing the header first when the file is new."""

    def __init__(self, path: Path, fp: dict[str, Any]) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.stat().st_size == 0:
            head = header_record(RESULTS_KIND, RESULTS_VERSION, {"fingerprint": fp, "created": now_iso()})
            path.write_text(dumps_line(head) + "\n", encoding="utf-8")

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            for r in records:
                fh.write(dumps_line(r) + "\n")
            fh.flush()


def _generate(llm: Any, todo: Sequence[Instance], lp: LangPrompts, cfg: RobustRunConfig, model: str,
              sink: _Appender, progress: Progress | None) -> list[dict[str, Any]]:
    from ragrade.llm.base import generate

    out: list[dict[str, Any]] = []
    for start in range(0, len(todo), cfg.batch_size):
        batch = todo[start : start + cfg.batch_size]
        completions = generate(llm, [_request(inst, lp, cfg) for inst in batch])
        if len(completions) != len(batch):
            raise DataError(f"{model} returned {len(completions)} results for {len(batch)} requests")
        recs = []
        for inst, comp in zip(batch, completions, strict=True):
            rec = _base_record(inst, model)
            ok = comp.error is None and comp.text is not None
            rec.update({"response": comp.text if ok else None, "failed": not ok,
                        "error": None if ok else (comp.error or "no text returned"),
                        "latency_s": comp.latency_s, "cached": comp.cached, "attempts": comp.attempts})
            recs.append(rec)
        sink.write(recs)
        out.extend(recs)
        if progress:
            progress("generate", start + len(batch), len(todo))
    return out


def _judge(judge_llm: Any, records: dict[str, dict[str, Any]], testbed: str, prompts: PromptSet,
           cfg: RobustRunConfig, sink: _Appender, progress: Progress | None) -> int:
    """Ask the judge about every answered record that has no verdict from it yet; returns the calls made."""
    from ragrade.llm.base import GenerationRequest, Message, generate

    task = {"negative": "rejection", "counterfactual": "error"}.get(testbed)
    if task is None:
        return 0
    name = judge_llm.name
    todo = [r for r in records.values()
            if r["condition"] == "documents" and not r.get("skipped") and not r.get("failed")
            and not ((r.get("judge") or {}).get("model") == name and (r.get("judge") or {}).get("task") == task
                     and not (r.get("judge") or {}).get("error"))]
    for start in range(0, len(todo), cfg.batch_size):
        batch = todo[start : start + cfg.batch_size]
        reqs = [GenerationRequest(messages=(Message("user", judge_prompt(prompts, task, r["query"],
                                                                           r["response"])),),
                                  temperature=0.0, max_tokens=JUDGE_MAX_TOKENS, json_schema=JUDGE_SCHEMA,
                                  question=r["query"], passages=(r["response"],), task="judge",
                                  meta={"key": r["key"]})
                for r in batch]
        comps = generate(judge_llm, reqs)
        for r, comp in zip(batch, comps, strict=True):
            ok = comp.error is None and comp.text is not None
            r["judge"] = {"task": task, "model": name, "raw": comp.text if ok else None,
                          "verdict": parse_verdict(comp.text) if ok else None,
                          "error": None if ok else (comp.error or "no text returned")}
        sink.write(batch)
        if progress:
            progress("judge", start + len(batch), len(todo))
    return len(todo)


def label_records(records: Sequence[dict[str, Any]], scoring: str, detectors: Detectors, lang: str) -> None:
    """Attach ``labels`` (under ``scoring``) to every non-skipped record, in place."""
    for r in records:
        if r.get("skipped"):
            r["labels"] = {}
            continue
        response = None if r.get("failed") else r.get("response")
        if scoring == "rgb":
            r["labels"] = rgb_label_response(response, r["answer"], lang, error=r.get("error"))
        else:
            r["labels"] = label_response(response, r["answer"], detectors, r.get("fakeanswer") or (),
                                         error=r.get("error"))
        r["scoring"] = scoring


def summarise(records: Sequence[dict[str, Any]], testbed: str, scoring: str, ratios: Sequence[float],
              seed: int = 0) -> dict[str, Any]:
    """Overall and per-ratio metrics of labelled records."""
    fn: Callable[..., dict[str, Any]] = summarise_rgb if scoring == "rgb" else summarise_default
    kwargs = {} if scoring == "rgb" else {"seed": seed}
    closed = [r for r in records if r["condition"] == "no_documents"]
    overall = fn(records, testbed, **kwargs)
    by_ratio = []
    for ratio in ratios:
        group = [r for r in records if r["condition"] == "documents" and abs(r["noise_ratio"] - ratio) < 1e-9]
        by_ratio.append({"noise_ratio": ratio, **fn(group + closed, testbed, **kwargs)})
    return {**overall, "by_noise_ratio": by_ratio}


def _failures(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"key": r["key"], "error": r.get("error")} for r in records if r.get("failed") and not r.get("skipped")]


def run_model(cfg: RobustRunConfig, model_spec: str, out_dir: Path, *, llm: Any = None, judge_llm: Any = None,
              progress: Progress | None = None, warn: Warn | None = None) -> ModelRun:
    """Run one model over the testbed into ``out_dir``; see the module docstring."""
    tb = get_testbed(cfg.testbed)
    data = load_rgb(cfg.data, limit=cfg.limit)
    if data.kind not in tb.data_kinds:
        raise DataError(f"{cfg.data}: the {tb.name} testbed needs {' or '.join(tb.data_kinds)} records, "
                        f"the file has {data.kind} records")
    ratios = resolve_ratios(tb, cfg.noise_ratios)
    lang = resolve_lang(cfg.lang, data)
    prompts = load_prompts(cfg.prompts)
    lp = prompts.lang(lang)
    detectors = build_detectors(cfg.rejection_phrases, cfg.error_phrases, always=[lp.rejection_sentence],
                                always_error=[lp.error_sentence])
    warnings = _warnings(data, lp, lang, cfg, detectors, warn)
    opts = BuildOptions(n_docs=cfg.docs, shortfall=cfg.shortfall, construction=cfg.construction, seed=cfg.seed,
                        correct_ratio=cfg.correct_ratio)
    instances = [build_instance(item, tb.name, r, opts) for r in ratios for item in data.items]
    if tb.name == "counterfactual" and cfg.closed_book:
        instances += [build_instance(item, tb.name, 0.0, opts, condition="no_documents") for item in data.items]
    if llm is None:
        from ragrade.llm import create_llm

        llm = create_llm(model_spec, **_llm_options(cfg, cfg.base_url))
    model = str(getattr(llm, "name", model_spec))
    fp = fingerprint(cfg, model, lang, lp, _file_sha256(cfg.data))
    path = out_dir / "results.jsonl"
    drop_torn_tail(path)  # a run ended at once (second Ctrl-C, kill -9) may have left half a line
    _, existing = read_results(path, fp)
    sink = _Appender(path, fp)
    resumed = 0
    records: dict[str, dict[str, Any]] = {}
    todo: list[Instance] = []
    fresh_skips: list[dict[str, Any]] = []
    for inst in instances:
        old = existing.get(inst.key)
        if old is not None and not old.get("failed"):
            records[inst.key] = old
            resumed += 1
        elif inst.skipped:
            rec = {**_base_record(inst, model), "response": None, "failed": False, "error": None}
            records[inst.key] = rec
            fresh_skips.append(rec)
        else:
            todo.append(inst)
    sink.write(fresh_skips)
    tick = _tracked(progress, len(instances) - len(todo), len(instances), model)
    for rec in _generate(llm, todo, lp, cfg, model, sink, tick):
        records[rec["key"]] = rec
    if cfg.judge:
        if judge_llm is None:
            from ragrade.llm import create_llm

            judge_llm = create_llm(cfg.judge, **_llm_options(cfg, cfg.judge_base_url or cfg.base_url))
        _judge(judge_llm, records, tb.name, prompts, cfg, sink, progress)
    ordered = [records[i.key] for i in instances]
    label_records(ordered, cfg.scoring, detectors, lang)
    write_jsonl(path, ordered, kind=RESULTS_KIND, version=RESULTS_VERSION,
                meta={"fingerprint": fp, "updated": now_iso()})
    metrics = {
        "ragrade": {"kind": METRICS_KIND, "version": METRICS_VERSION},
        "testbed": tb.name, "model": model, "is_baseline": bool(getattr(llm, "is_baseline", False)),
        "lang": lang, "scoring": cfg.scoring, "data": str(cfg.data), "data_kind": data.kind,
        "n_items": len(data.items), "noise_ratios": ratios, "n_docs": cfg.docs, "construction": cfg.construction,
        "shortfall": cfg.shortfall, "seed": cfg.seed, "correct_ratio": cfg.correct_ratio,
        "judge": getattr(judge_llm, "name", cfg.judge) if cfg.judge else None,
        "prompts": prompts.source, "detectors": detectors.describe(), "llm": _describe(llm),
        **summarise(ordered, tb.name, cfg.scoring, ratios, seed=cfg.seed),
        "failures": _failures(ordered), "created": now_iso(),
    }
    metrics.update(skipped_items=_skips(ordered), data_report=data.report, warnings=warnings)
    metrics["table"] = build_table([metrics])
    write_json(out_dir / "metrics.json", metrics)
    write_table(metrics["table"], out_dir / "table.csv")
    return ModelRun(model, out_dir, metrics, generated=len(todo), resumed=resumed)


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


def _llm_options(cfg: RobustRunConfig, base_url: str | None) -> dict[str, Any]:
    return {"base_url": base_url, "concurrency": cfg.concurrency, "cache": cfg.cache, "timeout": cfg.timeout,
            "max_retries": cfg.max_retries}


def _describe(llm: Any) -> dict[str, Any]:
    try:
        return dict(llm.describe())
    except Exception:  # a description is informative only
        return {"name": str(getattr(llm, "name", ""))}


def _skips(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items left out (id, noise ratio, reason), for metrics.json and the report."""
    return [{"id": r["item_id"], "noise_ratio": r["noise_ratio"], "reason": r["skipped"]} for r in records
            if r.get("skipped") and r["condition"] == "documents"]


def _warnings(data: RGBData, lp: LangPrompts, lang: str, cfg: RobustRunConfig, detectors: Detectors,
              warn: Warn | None) -> list[str]:
    """The loader's findings and unrecognisable instructed sentences, each passed to ``warn`` too."""
    notes = [*describe_report(data), *sentence_warnings(lp, lang, cfg.scoring, detectors)]
    if warn is not None:
        for note in notes:
            warn(note)
    return notes


def run_robust(cfg: RobustRunConfig, *, llms: Sequence[Any] | None = None, judge_llm: Any = None,
               progress: Progress | None = None, warn: Warn | None = None) -> tuple[list[ModelRun], dict[str, Any]]:
    """Run every model of ``cfg.llm``; returns the runs and the combined table (written to OUT/table.csv).

    ``warn`` receives each warning (loader findings, unrecognisable prompt sentences) once, before generation.
    """
    if not cfg.llm:
        raise ConfigError("--llm needs at least one model")
    if llms is not None and len(llms) != len(cfg.llm):
        raise ConfigError("one LLM object per --llm spec is needed")
    if llms is None:  # every model spec (and the judge's) is checked before the first model runs
        from ragrade.llm import create_llm

        llms = [create_llm(spec, **_llm_options(cfg, cfg.base_url)) for spec in cfg.llm]
        if cfg.judge and judge_llm is None:
            judge_llm = create_llm(cfg.judge, **_llm_options(cfg, cfg.judge_base_url or cfg.base_url))
    runs = []
    single = len(cfg.llm) == 1
    for i, spec in enumerate(cfg.llm):
        out_dir = cfg.out if single else cfg.out / model_slug(spec)
        runs.append(run_model(cfg, spec, out_dir, llm=llms[i] if llms else None, judge_llm=judge_llm,
                              progress=progress, warn=warn if i == 0 else None))
    table = build_table([r.metrics for r in runs])
    if not single:
        write_table(table, cfg.out / "table.csv")
    return runs, table


__all__ = [
    "METRICS_KIND",
    "METRICS_VERSION",
    "RESULTS_KIND",
    "RESULTS_VERSION",
    "ModelRun",
    "RobustRunConfig",
    "fingerprint",
    "label_records",
    "model_slug",
    "read_results",
    "render_table",
    "resolve_lang",
    "resolve_ratios",
    "run_model",
    "run_robust",
    "summarise",
]
