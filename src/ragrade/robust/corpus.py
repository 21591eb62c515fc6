"""Robustness testbeds built from the user's own corpus: an exam (or question/answer file) plus an index.

For every question with a short answer:

- **positives** are chunks that contain the answer (boundary-aware, normalised
  matching): the question's source chunk first, then retrieved chunks;
- **noise** are hard negatives: the top retrieved chunks that do not contain
  the answer, in rank order;
- **integration** items join two questions into one, each answer part with its
  own group of positives and noise containing neither answer;
- **counterfactual** items replace the answer in the positives with a
  plausible value of the same kind (the first usable distractor of the exam
  question), and keep only the documents where the replacement happened.

Questions that cannot make an item (answer in no retrieved chunk, fewer
supporting chunks than ``min_positives``, no noise, no usable distractor) are
dropped with their reason in the build report; nothing is dropped silently. The output files have the RGB shape, so
``ragrade robust run`` reads them like the original data.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from ragrade.errors import ConfigError, DataError, check_choice
from ragrade.io import JSONObject, iter_jsonl, now_iso, write_json
from ragrade.robust.data import RGBItem, write_rgb
from ragrade.robust.match import contains, contains_normalised, has_cjk, normalise, replace_all, same_text

BUILD_REPORT_VERSION = 2  # 2: options.min_positives


@dataclass(frozen=True)
class QA:
    """A question with accepted answer aliases and optional same-kind wrong values."""

    id: str
    question: str
    answers: tuple[str, ...]
    distractors: tuple[str, ...] = ()
    context: str = ""
    chunk_id: str = ""
    meta: JSONObject = field(default_factory=dict, compare=False)


#: the language of the built testbeds' prompts (``auto``: from the questions)
BuildLang = Literal["auto", "en", "zh"]
LANG_CHOICES: tuple[BuildLang, ...] = get_args(BuildLang)


@dataclass(frozen=True)
class CorpusBuildOptions:
    """Retrieval depth, pool sizes, pairing seed and language of the built testbeds."""

    k: int = 30
    max_positive: int = 5
    max_negative: int = 10
    seed: int = 0
    lang: str = "auto"  # one of LANG_CHOICES, checked (a BuildLang once every caller passes one)
    max_questions: int | None = None
    min_positives: int = 1  # questions with fewer supporting passages are dropped (with the reason)

    def __post_init__(self) -> None:
        if self.k < 1 or self.max_positive < 1 or self.max_negative < 1:
            raise ConfigError("$k, $max_positive and $max_negative must be at least 1")
        if not 1 <= self.min_positives <= self.max_positive:
            raise ConfigError(
                f"$min_positives must be between 1 and $max_positive ({self.max_positive}), got {self.min_positives}"
            )
        check_choice(self.lang, LANG_CHOICES, "lang")


@dataclass
class CorpusTestbeds:
    """The three built files' items and the build report."""

    base: list[RGBItem]
    integration: list[RGBItem]
    counterfactual: list[RGBItem]
    report: dict[str, object]


def qa_from_exam(path: str | Path) -> list[QA]:
    """Questions of an exam file: the correct choice is the answer, the other choices the distractors."""
    from ragrade.exam.files import read_exam

    _, questions = read_exam(path)
    out = []
    for q in questions:
        answer = q.choices[q.answer].strip()
        others = tuple(c.strip() for i, c in enumerate(q.choices) if i != q.answer and c.strip())
        out.append(
            QA(
                id=str(q.id),
                question=q.question,
                answers=(answer,),
                distractors=others,
                context=q.context,
                chunk_id=q.chunk_id,
                meta={"topic": (q.tags or {}).get("topic"), "doc_id": q.doc_id},
            )
        )
    return out


def _str_list(value: object, where: str, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise DataError(f"{where}: '{key}' must be a string or a list of strings")
    return tuple(str(v).strip() for v in value if str(v).strip())


def load_qa_file(path: str | Path) -> list[QA]:
    """Question/answer JSONL: ``question`` (or ``query``), ``answer`` (string or list of aliases),
    optional ``id``, ``distractors`` (same-kind wrong values), ``context``."""
    out: list[QA] = []
    for lineno, rec in iter_jsonl(path):
        if lineno == 1 and isinstance(rec.get("ragrade"), dict):
            continue
        where = f"{path}:{lineno}"
        question = rec.get("question", rec.get("query"))
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"{where}: missing 'question'")
        answers = _str_list(rec.get("answer"), where, "answer")
        if not answers:
            raise DataError(f"{where}: missing 'answer'")
        out.append(
            QA(
                id=str(rec.get("id", f"q{len(out)}")),
                question=question.strip(),
                answers=answers,
                distractors=_str_list(rec.get("distractors"), where, "distractors"),
                context=str(rec.get("context", "") or ""),
            )
        )
    if not out:
        raise DataError(f"{path}: no questions")
    ids = [q.id for q in out]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: duplicate question ids")
    return out


def _has_any(text: str, aliases: Sequence[str]) -> bool:
    norm = normalise(text)
    return any(contains_normalised(norm, normalise(a)) for a in aliases)


@dataclass
class _Pools:
    qa: QA
    positive: list[str]
    negative: list[str]
    positive_ids: list[str]
    negative_ids: list[str]


def _pools(qa: QA, hits: Sequence[Any], opts: CorpusBuildOptions) -> _Pools:
    pos: list[str] = []
    pos_ids: list[str] = []
    neg: list[str] = []
    neg_ids: list[str] = []
    seen: set[str] = set()
    if qa.context and _has_any(qa.context, qa.answers):
        pos.append(qa.context)
        pos_ids.append(qa.chunk_id or "source")
        seen.add(qa.context)
    for h in hits:
        if h.text in seen:
            continue
        seen.add(h.text)
        if _has_any(h.text, qa.answers):
            if len(pos) < opts.max_positive:
                pos.append(h.text)
                pos_ids.append(h.chunk_id)
        elif len(neg) < opts.max_negative:
            neg.append(h.text)
            neg_ids.append(h.chunk_id)
    return _Pools(qa, pos, neg, pos_ids, neg_ids)


def _pick_fake(qa: QA) -> str | None:
    norm_answers = [normalise(a) for a in qa.answers]
    for d in qa.distractors:
        nd = normalise(d)
        if not nd or any(nd == a or nd in a or a in nd for a in norm_answers):
            continue
        if any(same_text(d, a) for a in qa.answers):  # "七十" is no fake for "70"
            continue
        return d
    return None


def _counterfactual(p: _Pools) -> tuple[RGBItem | None, str | None]:
    fake = _pick_fake(p.qa)
    if fake is None:
        return None, "no usable distractor to serve as the counterfactual answer"
    wrong, right, ids = [], [], []
    for text, cid in zip(p.positive, p.positive_ids, strict=True):
        new, count = text, 0
        for alias in sorted(p.qa.answers, key=len, reverse=True):
            new, c = replace_all(new, alias, fake)
            count += c
        if count and not _has_any(new, p.qa.answers):
            wrong.append(new)
            right.append(text)
            ids.append(cid)
    if not wrong:
        return None, "the answer could not be replaced in any positive document"
    negative = [t for t in p.negative if not contains(t, fake)]
    meta = {"question_id": p.qa.id, "positive_chunks": ids, "fake_source": "distractor", **_clean(p.qa.meta)}
    return RGBItem(
        id=p.qa.id,
        query=p.qa.question,
        answer=(p.qa.answers,),
        kind="counterfactual",
        positive=tuple(right),
        positive_wrong=tuple(wrong),
        fakeanswer=((fake,),),
        negative=tuple(negative),
        meta=meta,
    ), None


def _clean(meta: Mapping[str, Any]) -> JSONObject:
    return {k: v for k, v in meta.items() if v is not None}


def _compatible(a: QA, b: QA) -> bool:
    na = [normalise(x) for x in a.answers]
    nb = [normalise(x) for x in b.answers]
    return not any(x in y or y in x for x in na for y in nb) and a.question != b.question


def _join(q1: str, q2: str, lang: str) -> str:
    if lang == "zh":
        return f"请回答以下两个问题：（1）{q1}（2）{q2}"
    return f"Answer both questions. (1) {q1} (2) {q2}"


def _integration(pools: Sequence[_Pools], opts: CorpusBuildOptions, lang: str) -> tuple[list[RGBItem], int]:
    order = list(pools)
    random.Random(opts.seed).shuffle(order)
    items: list[RGBItem] = []
    unpaired = 0
    while len(order) >= 2:
        a = order.pop(0)
        partner = next((b for b in order if _compatible(a.qa, b.qa)), None)
        if partner is None:
            unpaired += 1
            continue
        order.remove(partner)
        b = partner
        negatives: list[str] = []
        for pair in zip(a.negative, b.negative, strict=False):
            for t in pair:
                if t not in negatives and not _has_any(t, a.qa.answers) and not _has_any(t, b.qa.answers):
                    negatives.append(t)
        items.append(
            RGBItem(
                id=f"{a.qa.id}+{b.qa.id}",
                query=_join(a.qa.question, b.qa.question, lang),
                answer=(a.qa.answers, b.qa.answers),
                kind="integration",
                positive_groups=(tuple(a.positive), tuple(b.positive)),
                negative=tuple(negatives[: opts.max_negative]),
                meta={"question_ids": [a.qa.id, b.qa.id]},
            )
        )
    return items, unpaired + len(order)


def build_corpus_testbeds(qas: Sequence[QA], retriever: Any, opts: CorpusBuildOptions) -> CorpusTestbeds:
    """Build the base, integration and counterfactual items from ``qas`` with ``retriever`` (see module doc)."""
    chosen = list(qas)[: opts.max_questions] if opts.max_questions else list(qas)
    if not chosen:
        raise DataError("no questions to build testbeds from")
    lang = opts.lang
    if lang == "auto":
        lang = "zh" if sum(has_cjk(q.question) for q in chosen) * 2 > len(chosen) else "en"
    hits = retriever.retrieve([q.question for q in chosen], opts.k)
    dropped: list[dict[str, str]] = []
    usable: list[_Pools] = []
    base: list[RGBItem] = []
    cf: list[RGBItem] = []
    for qa, qhits in zip(chosen, hits, strict=True):
        p = _pools(qa, qhits, opts)
        if not p.positive:
            dropped.append({"id": qa.id, "testbed": "all", "reason": "the answer is in no retrieved chunk"})
            continue
        if len(p.positive) < opts.min_positives:
            dropped.append(
                {
                    "id": qa.id,
                    "testbed": "all",
                    "reason": f"{len(p.positive)} supporting passage(s), "
                    f"fewer than --min-positives {opts.min_positives}",
                }
            )
            continue
        if not p.negative:
            dropped.append({"id": qa.id, "testbed": "all", "reason": "every retrieved chunk contains the answer"})
            continue
        usable.append(p)
        base.append(
            RGBItem(
                id=qa.id,
                query=qa.question,
                answer=(qa.answers,),
                kind="base",
                positive=tuple(p.positive),
                negative=tuple(p.negative),
                meta={
                    "question_id": qa.id,
                    "positive_chunks": p.positive_ids,
                    "negative_chunks": p.negative_ids,
                    **_clean(qa.meta),
                },
            )
        )
        item, reason = _counterfactual(p)
        if item is None:
            dropped.append({"id": qa.id, "testbed": "counterfactual", "reason": str(reason)})
        else:
            cf.append(item)
    integration, unpaired = _integration(usable, opts, lang)
    report = {
        "version": BUILD_REPORT_VERSION,
        "created": now_iso(),
        "lang": lang,
        "options": {
            "k": opts.k,
            "max_positive": opts.max_positive,
            "max_negative": opts.max_negative,
            "seed": opts.seed,
            "max_questions": opts.max_questions,
            "min_positives": opts.min_positives,
        },
        "retriever": _describe(retriever),
        "questions": len(chosen),
        "base": len(base),
        "integration": len(integration),
        "counterfactual": len(cf),
        "unpaired_for_integration": unpaired,
        "dropped": dropped,
    }
    return CorpusTestbeds(base, integration, cf, report)


def _describe(retriever: Any) -> JSONObject:
    try:
        return dict(retriever.describe())
    except Exception:  # informative only
        return {"name": str(getattr(retriever, "name", type(retriever).__name__))}


def write_corpus_testbeds(built: CorpusTestbeds, out_dir: str | Path, source: Mapping[str, object]) -> dict[str, str]:
    """Write base.jsonl, integration.jsonl, counterfactual.jsonl and build_report.json; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}
    meta: dict[str, object] = {"source": dict(source), "lang": built.report["lang"]}
    if _offline_exam(source.get("exam")):
        meta["offline_exam"] = True  # `robust run` says once what that means for noise (OFFLINE_EXAM_NOTE)
    for name, items in (
        ("base", built.base),
        ("integration", built.integration),
        ("counterfactual", built.counterfactual),
    ):
        target = out / f"{name}.jsonl"
        if items:
            write_rgb(target, items, meta=meta)
            paths[name] = str(target)
        elif target.exists():  # a stale file from an earlier build must not be mistaken for this one
            target.unlink()
    report = {**built.report, "source": dict(source), "files": paths, "offline_exam": bool(meta.get("offline_exam"))}
    write_json(out / "build_report.json", report)
    paths["report"] = str(out / "build_report.json")
    return paths


OFFLINE_EXAM_NOTE = (
    "the testbed was built from an offline (cloze) exam, whose questions quote a sentence of their source passage "
    "word for word: a reader finds that passage among any noise, so accuracy hardly moves with the noise ratio; "
    "build the testbeds from an exam written by an LLM or from a QA file (`ragrade robust build --qa FILE`)"
)


def _offline_exam(exam: object) -> bool:
    """True when ``exam`` names an exam file the offline cloze generator wrote."""
    if not isinstance(exam, str) or not exam or not Path(exam).is_file():
        return False
    from ragrade.exam.offline import is_offline_exam
    from ragrade.io import read_jsonl

    header, _ = read_jsonl(exam)
    return header is not None and is_offline_exam(dict(header.meta))


__all__ = [
    "LANG_CHOICES",
    "OFFLINE_EXAM_NOTE",
    "QA",
    "BuildLang",
    "CorpusBuildOptions",
    "CorpusTestbeds",
    "build_corpus_testbeds",
    "load_qa_file",
    "qa_from_exam",
    "write_corpus_testbeds",
]


def build_testbeds_from(
    out_dir: str | Path,
    index: Any,
    retriever: str,
    opts: CorpusBuildOptions,
    *,
    exam: str | Path | None = None,
    qa: str | Path | None = None,
) -> tuple[CorpusTestbeds, dict[str, str]]:
    """Build the testbeds from an exam or a QA file (the caller checks that exactly one is given) and an index
    (its folder, or a loaded index), and write them under ``out_dir``: ``robust build`` and the Python API."""
    from ragrade.retrieval.index import load_index

    questions = qa_from_exam(exam) if exam is not None else load_qa_file(Path(str(qa)))
    opened = load_index(index) if isinstance(index, (str, Path)) else index
    built = build_corpus_testbeds(questions, opened.retriever(retriever), opts)
    source = {
        "exam": str(exam) if exam else None,
        "qa": str(qa) if qa else None,
        "index": str(opened.path),
        "retriever": retriever,
    }
    return built, write_corpus_testbeds(built, out_dir, source)
