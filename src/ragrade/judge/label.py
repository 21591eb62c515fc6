"""``ragrade label``: one self-contained HTML page for grading judged answers by hand.

The page holds a random sample of the judged answers (question, answer,
reference, passages; for an exam: the question, its choices and its source
passage) spread evenly over the configurations and drawn uniformly within each
one, so that ``ragrade judge calibrate`` may treat each configuration's labels
as a uniform sample. Every text travels as JSON inside a
``<script type="application/json">`` block (``<`` written ``\\u003c``) and is
put on the page with ``textContent``: nothing from the data is ever parsed as
HTML. The page needs no server and no network; progress is kept in the
browser's ``localStorage`` under a key unique to the page's sample; the
*Download labels.jsonl* button writes ``{"id", "metric", "label"}`` lines.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragrade.errors import ConfigError, DataError
from ragrade.io import JSONObject, atomic_write_text, read_json, read_jsonl
from ragrade.judge.calibrate import (
    EXAM_CONFIG,
    EXAM_METRIC,
    SCALES,
    Scale,
    label_id,
    load_scores,
    resolve_scores_path,
)

TEMPLATE = "label.html.j2"
PROMPTS: dict[str, str] = {
    "correctness": "How correct and complete is the answer, taking the reference as the truth? (1 wrong ... 5 right)",
    "faithfulness": "Is every claim of the answer backed by the passages? (y/n)",
    "relevancy": "Does the answer address the question, with passages on its subject? (y/n)",
    "exact": "Does the answer say the same as the reference? (y/n)",
    "bertscore": "How much of the reference's meaning does the answer carry? (0 none ... 4 all)",
    "claims": "How well do the answer's facts match the reference's (wrong extras and missing facts both count)? "
    "(0 not at all ... 4 fully)",
    EXAM_METRIC: "Is this a valid question: self-contained, answerable, with exactly one correct choice? (y/n)",
}
# computed by a formula, not judgements: nothing for a person to check unless asked for by name (--metrics)
COMPUTED = ("exact", "bertscore")


def _options(scale: Scale) -> list[JSONObject]:
    """The grades a person can give, each with its key."""
    if scale.kind == "binary":
        return [{"key": "y", "value": 1, "text": "yes"}, {"key": "n", "value": 0, "text": "no"}]
    if scale.kind == "ordinal":
        return [{"key": str(v), "value": v, "text": str(v)} for v in range(int(scale.low), int(scale.high) + 1)]
    return [{"key": str(i), "value": i / 4, "text": f"{i / 4:g}"} for i in range(5)]


def _answers_path(scores_path: Path, meta: dict[str, Any], given: Path | None) -> Path:
    if given is not None:
        return given / "answers.jsonl" if given.is_dir() else given
    raw = meta.get("answers")
    name = Path(raw).name if raw else "answers.jsonl"
    up = scores_path.parent.parent  # a job's judge/ folder holds answers/ beside scores/
    candidates = [Path(raw)] if raw else []
    candidates += [scores_path.parent / name, up / name, up / "answers" / name]
    for cand in candidates:
        if cand.is_file():
            return cand
    raise ConfigError(
        f"{scores_path}: cannot find the answers file the judge read ({raw or 'not recorded'}); give it with $answers"
    )


def _exam_items(path: Path, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items = []
    for rec in records:
        choices = [str(c) for c in rec.get("choices") or []]
        answer = rec.get("answer")
        items.append(
            {
                "config": EXAM_CONFIG,
                "id": str(rec["id"]),
                "fields": [
                    ["question", str(rec.get("question", ""))],
                    ["choices", "\n".join(f"{'*' if i == answer else ' '} {c}" for i, c in enumerate(choices))],
                    ["source passage", str(rec.get("context", ""))],
                ],
                "metrics": {EXAM_METRIC: 1.0},
            }
        )
    return items


def _judge_items(
    scores_path: Path, meta: dict[str, object], records: list[dict[str, Any]], answers: Path | None
) -> list[dict[str, Any]]:
    from ragrade.judge.inputs import read_answers

    by_key: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for rec in records:
        if rec.get("status") == "ok" and rec.get("score") is not None:
            by_key[(str(rec["config"]), str(rec["id"]))][str(rec["metric"])] = float(rec["score"])
    path = _answers_path(scores_path, meta, answers)
    manifest = scores_path.parent / "manifest.json"
    fields = ((read_json(manifest) or {}).get("config") or {}).get("fields") if manifest.is_file() else None
    items = []
    for it in read_answers(path, fields or None):  # the judge's own field map (--field)
        if it.key not in by_key:
            continue
        fields = [["question", it.query or ""], ["answer", it.answer or ""]]
        fields += [["reference", r] for r in it.references]
        fields += [[f"passage {i}", c] for i, c in enumerate(it.contexts, start=1)]
        items.append({"config": it.config, "id": it.id, "fields": fields, "metrics": by_key[it.key]})
    missing = set(by_key) - {(i["config"], i["id"]) for i in items}
    if missing:
        c, i = sorted(missing)[0]
        raise DataError(f"{path}: no answer for judged item '{i}' of configuration '{c}' ({len(missing)} missing)")
    return items


def stratified_sample(items: Sequence[JSONObject], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` items spread evenly over configurations (round robin), uniformly random within each one."""
    rng = random.Random(seed)
    pools: dict[str, list[JSONObject]] = defaultdict(list)
    for it in items:
        pools[str(it["config"])].append(it)
    for pool in pools.values():
        rng.shuffle(pool)
    out: list[JSONObject] = []
    while len(out) < n and any(pools.values()):
        for config in sorted(pools):
            if pools[config] and len(out) < n:
                out.append(pools[config].pop())
    rng.shuffle(out)
    return out


def build_page_data(
    scores: str | Path, *, n: int, metrics: Sequence[str] | None = None, answers: Path | None = None, seed: int = 0
) -> dict[str, Any]:
    """The page's data: sampled items with their texts, the grading tasks and each metric's scale."""
    path = resolve_scores_path(scores)
    load_scores(path)  # validates every record (a missing field is named with its line)
    header, records = read_jsonl(path)
    meta = dict(header.meta) if header else {}
    kind = header.kind if header else "judge_scores"
    if kind == "exam":
        items = _exam_items(path, records)
    elif kind == "judge_scores":
        items = _judge_items(path, meta, records, answers)
    else:
        raise DataError(f"{path}: a '{kind}' file; label reads a judge scores.jsonl (or its folder) or an exam file")
    present = sorted({m for it in items for m in it["metrics"]})
    chosen = list(metrics) if metrics else [m for m in present if m not in COMPUTED]
    if not chosen:
        raise ConfigError(
            f"{path} holds only computed metrics ({', '.join(present)}), which are formulas, not judgements: "
            "there is nothing for a person to grade. Judge with an LLM metric (correctness, faithfulness, "
            "relevancy, claims), or name them with $metrics to grade them anyway"
        )
    unknown = [m for m in chosen if m not in present]
    if unknown:
        raise ConfigError(f"$metrics: no judged {', '.join(unknown)} in {path} (judged: {', '.join(present)})")
    items = [it for it in items if any(m in it["metrics"] for m in chosen)]
    if not items:
        raise DataError(f"{path}: no item with an ok score to label")
    ids = defaultdict(set)
    for it in items:
        ids[it["id"]].add(it["config"])
    sample = stratified_sample(items, n, seed)
    tasks = []
    for k, it in enumerate(sample):
        it["label_id"] = label_id(it["config"], it["id"], len(ids[it["id"]]) == 1)
        for m in chosen:
            if m in it["metrics"]:
                tasks.append({"item": k, "metric": m})
        del it["metrics"]  # the judge's scores stay off the page: graders see the texts only
    scales = {
        m: {"prompt": PROMPTS.get(m, f"Grade {m}"), "options": _options(SCALES.get(m, Scale("continuous", 0, 1)))}
        for m in chosen
    }
    digest = hashlib.sha256(json.dumps([str(path.resolve()), seed, tasks, [i["label_id"] for i in sample]]).encode())
    return {"source": str(path), "items": sample, "tasks": tasks, "scales": scales, "key": digest.hexdigest()[:16]}


def render_label_page(data: Mapping[str, object], title: str = "ragrade: grade the judged answers") -> str:
    """The page's HTML (Jinja2 with autoescaping; the data as escaped JSON)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parents[1] / "report" / "templates")),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
    )
    blob = json.dumps(data, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    import markupsafe

    return env.get_template(TEMPLATE).render(title=title, data_json=markupsafe.Markup(blob), source=data["source"])


def write_label_page(
    scores: str | Path,
    out: str | Path,
    *,
    n: int = 100,
    metrics: Sequence[str] | None = None,
    answers: Path | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Build and write the page; returns counts for the CLI."""
    data = build_page_data(scores, n=n, metrics=metrics, answers=answers, seed=seed)
    atomic_write_text(Path(out), render_label_page(data))
    return {"n_items": len(data["items"]), "n_tasks": len(data["tasks"]), "metrics": list(data["scales"])}


__all__ = ["COMPUTED", "build_page_data", "render_label_page", "stratified_sample", "write_label_page"]
