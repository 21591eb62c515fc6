"""Exam generation: sample chunks, write candidates, filter them, shuffle, tag, and count every loss.

``generate_exam(chunks, llm, cfg)`` returns ``(questions, funnel)``; ``llm`` is
an :class:`~ragrade.llm.base.LLM` or ``None`` for the offline cloze generator.
Candidates are generated in rounds, each sized by the share kept so far, until
``n`` survive the filters or the rounds must stop: the offline generator may
ask every eligible chunk; the LLM generator stops at its request cap
(``max_requests``, else ``n x oversample x max_rounds``) or after ``max_rounds``
rounds. The filters run over the whole candidate pool after each round, so
quantile thresholds see every candidate. Each candidate ends kept or with
exactly one reason; :func:`ragrade.exam.funnel.shortfall_line` says in one line
why an exam has fewer questions than requested.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragrade.corpus.types import Chunk
from ragrade.embedding.base import Embedder
from ragrade.errors import ConfigError, DataError
from ragrade.exam.analytics import exam_analytics
from ragrade.exam.config import ExamConfig
from ragrade.exam.corpus import CORPUS_KEY, corpus_fingerprint
from ragrade.exam.embedding import memoised
from ragrade.exam.files import Question, write_exam
from ragrade.exam.filters import FilterItem, SelfContainment, extra_candidate, intra_candidate, near_duplicates
from ragrade.exam.funnel import build_funnel, write_sidecars
from ragrade.exam.offline import ClozeGenerator
from ragrade.exam.placeholder import is_placeholder_text
from ragrade.exam.taxonomy import tag_question
from ragrade.exam.text import derived_seed, normalise_choice, split_sentences, stable_hash
from ragrade.exam.writers import ClozeWriter, LLMWriter, QuestionWriter, Raw
from ragrade.io import JSONObject
from ragrade.llm.base import LLM

ProgressFn = Callable[[int, int, int], None]  # (generated, target, valid so far)


@dataclass
class ExamResult:
    """Kept questions, the funnel, and every rejected candidate with its reason."""

    questions: list[Question]
    funnel: dict[str, Any]
    rejected: list[JSONObject] = field(default_factory=list)
    generator: JSONObject = field(default_factory=dict)
    corpus: dict[str, object] = field(default_factory=dict)  # the chunks' fingerprint (exam/corpus.py)


def stratum_of(chunk: Chunk, field_name: str) -> str:
    """The stratum of ``chunk`` for ``field_name`` (``source``/``doc_id`` or a metadata key)."""
    if field_name in ("source", "doc_id"):
        return str(getattr(chunk, field_name))
    val = chunk.metadata.get(field_name)
    return "(none)" if val is None else str(val)


def sample_order(chunks: Sequence[Chunk], seed: int, topic_field: str | None = None) -> list[Chunk]:
    """All ``chunks`` in the order they will be asked about (seeded).

    Uniform: a seeded shuffle. Stratified: strata take turns (round robin, in a
    seeded order) and documents take turns within a stratum, so no stratum or
    file dominates a prefix of the order.
    """
    rng = random.Random(derived_seed(seed, "sample", topic_field or ""))
    if not topic_field:
        order = sorted(chunks, key=lambda c: c.id)
        rng.shuffle(order)
        return order
    strata: dict[str, list[Chunk]] = defaultdict(list)
    for c in chunks:
        strata[stratum_of(c, topic_field)].append(c)
    queues = [interleave_by_document(strata[name], rng) for name in sorted(strata)]
    rng.shuffle(queues)
    out: list[Chunk] = []
    while any(queues):
        out.extend(q.pop(0) for q in queues if q)
    return out


def interleave_by_document(chunks: Sequence[Chunk], rng: random.Random) -> list[Chunk]:
    """``chunks`` with their documents taking turns (round robin), both orders drawn from ``rng``.

    The documents are visited in a shuffled order and each document's chunks
    are shuffled; the result depends only on the chunk ids and ``rng``'s
    state, not on the input order.
    """
    by_doc: dict[str, list[Chunk]] = defaultdict(list)
    for c in sorted(chunks, key=lambda c: c.id):
        by_doc[c.doc_id].append(c)
    doc_ids = sorted(by_doc)
    rng.shuffle(doc_ids)
    for d in doc_ids:
        rng.shuffle(by_doc[d])
    out: list[Chunk] = []
    while any(by_doc[d] for d in doc_ids):
        out.extend(by_doc[d].pop() for d in doc_ids if by_doc[d])
    return out


def _items(raws: Sequence[Raw]) -> list[FilterItem]:
    out = []
    for r in raws:
        if r.parsed is None:
            raise ValueError("filter items need parsed candidates")
        out.append(FilterItem(r.parsed.question, r.parsed.choices, r.parsed.answer, r.chunk.text))
    return out


def run_filters(
    raws: Sequence[Raw], cfg: ExamConfig, embedder: Embedder
) -> tuple[list[str | None], dict[str, JSONObject]]:
    """One reason (``"stage:why"``) or None per parsed candidate, and each filter's threshold record."""
    reasons: list[str | None] = [None] * len(raws)
    records: dict[str, JSONObject] = {}
    alive = list(range(len(raws)))
    items = _items(raws)
    stages: list[tuple[str, Callable[[list[FilterItem]], Any]]] = []
    if cfg.self_containment:
        sc = SelfContainment(cfg.extra_patterns)
        stages.append(("self_containment", sc))
    stages.append(("intra_candidate", lambda its: intra_candidate(its, embedder, cfg.intra_candidate)))
    stages.append(("extra_candidate", lambda its: extra_candidate(its, embedder, cfg.extra_candidate)))
    stages.append(("near_duplicate", lambda its: near_duplicates(its, embedder, cfg.near_duplicate)))
    for name, fn in stages:
        res = fn([items[i] for i in alive])
        records[name] = {**res.thresholds, "in": len(alive), "removed": res.removed}
        survivors = []
        for i, why in zip(alive, res.reasons, strict=True):
            if why is None:
                survivors.append(i)
            else:
                reasons[i] = why
        alive = survivors
    return reasons, records


def _positions(m: int, cfg: ExamConfig) -> list[int]:
    rng = random.Random(derived_seed(cfg.seed, "positions", cfg.shuffle))
    if cfg.shuffle == "balanced":
        pos = [i % 4 for i in range(m)]
        rng.shuffle(pos)
        return pos
    return [rng.randrange(4) for _ in range(m)]


def _absurd(
    raws: Sequence[Raw], pool: Sequence[Raw], writer: QuestionWriter, embedder: Embedder, seed: int
) -> list[list[str]]:
    """Unrelated distractors for each kept candidate (terms of another kind / answers to unrelated questions)."""
    out: list[list[str]] = []
    if isinstance(writer, ClozeWriter):
        for r in raws:
            assert r.parsed is not None
            got = writer.generator.absurd_distractors(
                r.chunk, str(r.generator.get("kind")), r.parsed.choices[r.parsed.answer], r.parsed.question
            )
            out.append(got)
        return out
    answers = [(p.chunk.id, p.parsed.choices[p.parsed.answer]) for p in pool if p.parsed is not None]
    sentences = [
        (c.id, c.text[a:b])
        for c in {p.chunk.id: p.chunk for p in pool}.values()
        for a, b in split_sentences(c.text)[:3]
    ]
    texts = [t for _, t in answers + sentences]
    vecs = np.asarray(embedder.embed(texts), dtype=np.float64) if texts else np.zeros((0, 1))
    for r in raws:
        assert r.parsed is not None
        correct = r.parsed.choices[r.parsed.answer]
        q = np.asarray(embedder.embed([f"{r.parsed.question}\n{correct}"]), dtype=np.float64)[0]
        sims = vecs @ q if len(texts) else np.zeros(0)
        rng = random.Random(derived_seed(seed, "absurd", r.chunk.id))
        order = sorted(range(len(texts)), key=lambda i: (float(sims[i]), rng.random()))
        picked: list[str] = []
        for i in order:
            cid = (answers + sentences)[i][0]
            t = texts[i]
            if cid == r.chunk.id or normalise_choice(t) in {normalise_choice(x) for x in [correct, *picked]}:
                continue
            picked.append(t)
            if len(picked) == 3:
                break
        out.append(picked)
    return out


def _to_questions(kept: Sequence[Raw], cfg: ExamConfig, absurd: list[list[str]] | None) -> list[Question]:
    positions = _positions(len(kept), cfg)
    questions: list[Question] = []
    for k, (r, pos) in enumerate(zip(kept, positions, strict=True)):
        p = r.parsed
        assert p is not None
        correct = p.choices[p.answer]
        distractors = [c for i, c in enumerate(p.choices) if i != p.answer]
        if absurd is not None and len(absurd[k]) == 3:
            distractors = list(absurd[k])
        qid = "q" + stable_hash(r.chunk.id, p.question, correct)
        random.Random(derived_seed(cfg.seed, "shuffle", qid)).shuffle(distractors)
        choices = [*distractors[:pos], correct, *distractors[pos:]]
        tags = tag_question(p.question)
        tags["topic"] = r.chunk.metadata.get(cfg.topic_field or "topic")
        gen = {**r.generator, "raw_answer": "ABCD"[p.answer], "seed": cfg.seed}
        if absurd is not None:
            gen["absurd"] = len(absurd[k]) == 3
        questions.append(
            Question(
                id=qid,
                question=p.question,
                choices=choices,
                answer=pos,
                doc_id=r.chunk.doc_id,
                chunk_id=r.chunk.id,
                source=r.chunk.source,
                tags=tags,
                generator=gen,
                context=r.chunk.display_text(),  # as shown to a reader: a split code block keeps its fences
                span=(r.chunk.start, r.chunk.end),
            )
        )
    return questions


def _rejected_record(r: Raw, reason: str, detail: str = "") -> JSONObject:
    rec: JSONObject = {
        "chunk_id": r.chunk.id,
        "doc_id": r.chunk.doc_id,
        "source": r.chunk.source,
        "stage": reason.partition(":")[0],
        "reason": reason,
        "detail": detail,
    }
    if r.parsed is not None:
        rec.update(question=r.parsed.question, choices=list(r.parsed.choices), answer=r.parsed.answer)
    if r.text is not None:
        rec["raw"] = r.text[:4000]
    if "response_format" in r.generator:  # LLM candidates: how JSON was asked of the server for this one
        rec["response_format"] = r.generator["response_format"]
    return rec


def make_writer(
    chunks: Sequence[Chunk], order: Sequence[Chunk], llm: LLM | None, cfg: ExamConfig, embedder: Embedder
) -> QuestionWriter:
    """The LLM writer, or the offline cloze writer (``llm`` None) with a bounded distractor pool."""
    if llm is not None:
        return LLMWriter(llm, cfg)
    pool = list(order[: cfg.distractor_pool])
    return ClozeWriter(ClozeGenerator(pool, embedder, seed=cfg.seed, topic_field=cfg.topic_field), cfg)


def check_prompt_files(cfg: ExamConfig) -> None:
    """ConfigError for a prompt file given that is unreadable, empty or lacks ``{document}`` (checked whichever
    generator runs: the offline cloze writer uses no prompt, but a bad file is a mistake either way)."""
    from ragrade.exam.prompts import SYSTEM_PROMPT, USER_PROMPT, load_template

    load_template(cfg.prompt_file, USER_PROMPT, require_document=True)
    load_template(cfg.system_prompt_file, SYSTEM_PROMPT, require_document=False)


def _eligible_chunks(chunks: Sequence[Chunk], llm: LLM | None, cfg: ExamConfig) -> list[Chunk]:
    """The chunks long enough to ask about (errors for no chunks, a baseline LLM, or none long enough)."""
    check_prompt_files(cfg)
    if not chunks:
        raise DataError("no chunks to generate questions from")
    if llm is not None and getattr(llm, "is_baseline", False) and not hasattr(llm, "agenerate"):
        raise ConfigError(f"{llm.name} cannot write questions")
    long_enough = [c for c in chunks if len(c.text.strip()) >= cfg.min_chunk_chars]
    if not long_enough:
        raise DataError(
            f"all {len(chunks)} chunks are shorter than {cfg.min_chunk_chars} characters; lower $min_chunk_chars "
            "(the [exam] table of an `exam generate` config file, the [exam.options] table of a job config)"
        )
    eligible = [c for c in long_enough if not is_placeholder_text(c.text)]  # lorem ipsum: nothing to ask
    if not eligible:
        raise DataError(f"all {len(long_enough)} chunks long enough to ask about are placeholder text (lorem ipsum)")
    return eligible


@dataclass
class _Rounds:
    """What the generate-and-filter rounds produced, and why they stopped."""

    raws: list[Raw]
    reasons: list[str | None]  # one per parsed candidate (``r.ok``), None when kept
    records: dict[str, JSONObject]
    rounds: int
    stopped: str = "enough"  # enough, pool (every eligible chunk asked), requests (the LLM cap), rounds, dry_run
    max_requests: int | None = None  # the LLM's request cap (None: the offline generator, no cap)


def _dry_run(writer: QuestionWriter) -> bool:
    from ragrade.llm.dryrun import is_dry_run

    return is_dry_run(getattr(writer, "llm", None))


def request_cap(cfg: ExamConfig) -> int:
    """The most LLM requests of a generation: ``max_requests``, else ``ceil(n x oversample x max_rounds)``."""
    return cfg.max_requests if cfg.max_requests is not None else math.ceil(cfg.n * cfg.oversample * cfg.max_rounds)


def next_round(n: int, kept: int, asked: int, left: int) -> int:
    """How many chunks the next round asks: those still needed divided by the share kept so far, with 10%
    to spare (at least doubling what was asked while nothing was kept), at least one and at most ``left``."""
    need = max(n - kept, 1)
    want = math.ceil(need * asked / kept * 1.1) + 1 if kept else max(2 * asked, need)
    return max(1, min(want, left))


def _stop_reason(kept: int, cfg: ExamConfig, asked: int, pool: int, rounds: int, cap: int | None) -> str | None:
    """Why the rounds stop now (see :class:`_Rounds`), or None to go on."""
    if kept >= cfg.n:
        return "enough"
    if asked >= pool:
        return "pool"
    if cap is not None and asked >= cap:
        return "requests"
    if cap is not None and rounds >= cfg.max_rounds:
        return "rounds"
    return None


def _generate_rounds(
    order: Sequence[Chunk], writer: QuestionWriter, cfg: ExamConfig, emb: Embedder, progress: ProgressFn | None
) -> _Rounds:
    """Write candidates in rounds, re-filtering the whole pool, until ``n`` survive or the rounds must stop.

    The first round asks ``n x oversample`` chunks, each later one as many as the share kept so far says are
    needed. The offline generator may ask every eligible chunk; the LLM one stops at :func:`request_cap`
    requests or after ``max_rounds`` rounds, whichever comes first.
    """
    raws: list[Raw] = []
    cursor, rounds = 0, 0
    cap = None if isinstance(writer, ClozeWriter) else request_cap(cfg)
    want = min(len(order), math.ceil(cfg.n * cfg.oversample), cap if cap is not None else len(order))
    reasons: list[str | None] = []
    records: dict[str, JSONObject] = {}
    while True:
        rounds += 1
        batch = order[cursor : cursor + want]
        cursor += len(batch)
        done_before = len(raws)
        valid_before = sum(r.ok for r in raws)

        def report(
            done: int, valid: int, base: int = done_before, vbase: int = valid_before, target: int = cursor
        ) -> None:
            if progress is not None:
                progress(base + done, target, vbase + valid)

        report(0, 0)  # a top-up round: the new target at once, not after its first batch
        raws.extend(writer.write(batch, report))
        parsed = [r for r in raws if r.ok]
        reasons, records = run_filters(parsed, cfg, emb)
        survivors = sum(r is None for r in reasons)
        stop = "dry_run" if _dry_run(writer) else _stop_reason(survivors, cfg, cursor, len(order), rounds, cap)
        if stop is not None:  # a dry run counts one round: top-up rounds only replace rejected candidates
            return _Rounds(raws, reasons, records, rounds, "enough" if survivors >= cfg.n else stop, cap)
        left = len(order) - cursor if cap is None else min(len(order), cap) - cursor
        want = next_round(cfg.n, survivors, cursor, left)


def _rejections(
    raws: Sequence[Raw], parsed: Sequence[Raw], reasons: Sequence[str | None], surplus: Sequence[Raw]
) -> tuple[list[JSONObject], list[str]]:
    """A record and a reason for every candidate not kept (failed, filtered, or surplus), in candidate order."""
    reason_of = {id(r): why for r, why in zip(parsed, reasons, strict=True)}
    rejected: list[JSONObject] = []
    all_reasons: list[str] = []
    for r in raws:
        if not r.ok:
            why = f"{r.stage}:{r.reason}"
            detail = r.detail
        elif (w := reason_of.get(id(r))) is not None:
            why, detail = w, ""
        elif any(r is s for s in surplus):
            why, detail = "surplus", "more candidates survived than requested"
        else:
            continue
        all_reasons.append(why)
        rejected.append(_rejected_record(r, why, detail))
    return rejected, all_reasons


def _chunk_counts(chunks: Sequence[Chunk], eligible: Sequence[Chunk], cfg: ExamConfig, asked: int) -> JSONObject:
    """How many chunks there were, were too short, were placeholder text (only when some were), were asked."""
    long_enough = sum(len(c.text.strip()) >= cfg.min_chunk_chars for c in chunks)
    out: JSONObject = {"total": len(chunks), "too_short": len(chunks) - long_enough}
    if long_enough > len(eligible):
        out["placeholder"] = long_enough - len(eligible)
    return {**out, "eligible": len(eligible), "asked": asked}


def _funnel_extra(
    chunks: Sequence[Chunk],
    eligible: Sequence[Chunk],
    gen: _Rounds,
    parsed: Sequence[Raw],
    writer: QuestionWriter,
    cfg: ExamConfig,
    n_questions: int,
) -> JSONObject:
    """The funnel's extra fields: generator, rounds, chunk counts, formats, raw answer letters, shortfall."""
    raw_letters = {
        letter: sum(1 for r in parsed if r.parsed and "ABCD"[r.parsed.answer] == letter) for letter in "ABCD"
    }
    return {
        "generator": writer.name,
        "requested": cfg.n,
        "seed": cfg.seed,
        "rounds": gen.rounds,
        "chunks": _chunk_counts(chunks, eligible, cfg, len(gen.raws)),
        "formats": dict(
            sorted(
                {
                    f: sum(1 for r in parsed if r.parsed and r.parsed.format == f)
                    for f in {r.parsed.format for r in parsed if r.parsed}
                }.items()
            )
        ),
        "raw_answer_letters": raw_letters,
        "shortfall": max(0, cfg.n - n_questions),
        "stopped": gen.stopped,  # enough, pool, requests, rounds or dry_run (see shortfall_line)
        "max_requests": gen.max_requests,
        "absurd": cfg.absurd,
        **_format_counts(gen.raws),
        **_stem_rule_counts(writer),
    }


def _stem_rule_counts(writer: QuestionWriter) -> JSONObject:
    """``{"stem_rules": {rule: blanks}}``: the candidate blanks the offline stem rules set aside; ``{}`` else."""
    if not isinstance(writer, ClozeWriter):
        return {}
    return {"stem_rules": writer.generator.set_aside_counts()}


def _format_counts(raws: Sequence[Raw]) -> JSONObject:
    """``{"response_format": {format: candidates}}`` over the LLM candidates that got a reply; ``{}`` offline."""
    if not any("response_format" in r.generator for r in raws):
        return {}
    counts = Counter(str(f) for r in raws if (f := r.generator.get("response_format")) is not None)
    return {"response_format": dict(sorted(counts.items()))}


def generate_exam_full(
    chunks: Sequence[Chunk],
    llm: LLM | None,
    cfg: ExamConfig,
    *,
    embedder: Embedder | None = None,
    progress: ProgressFn | None = None,
) -> ExamResult:
    """Generate an exam of up to ``cfg.n`` questions; see the module docstring."""
    eligible = _eligible_chunks(chunks, llm, cfg)
    if embedder is None:
        from ragrade.embedding.embed import default_embedder

        embedder = default_embedder()
    emb = memoised(embedder)
    order = sample_order(eligible, cfg.seed, cfg.topic_field)
    writer = make_writer(chunks, order, llm, cfg, emb)
    gen = _generate_rounds(order, writer, cfg, emb, progress)
    raws, reasons = gen.raws, gen.reasons
    parsed = [r for r in raws if r.ok]
    kept = [r for r, why in zip(parsed, reasons, strict=True) if why is None]
    surplus = kept[cfg.n :]
    kept = kept[: cfg.n]
    absurd = _absurd(kept, raws, writer, emb, cfg.seed) if cfg.absurd else None
    questions = _to_questions(kept, cfg, absurd)
    rejected, all_reasons = _rejections(raws, parsed, reasons, surplus)
    extra = _funnel_extra(chunks, eligible, gen, parsed, writer, cfg, len(questions))
    funnel = build_funnel(len(raws), all_reasons, len(questions), thresholds=gen.records, extra=extra)
    return ExamResult(questions, funnel, rejected, writer.describe(), corpus_fingerprint(chunks))


def generate_exam(
    chunks: Sequence[Chunk],
    llm: LLM | None,
    cfg: ExamConfig,
    *,
    embedder: Embedder | None = None,
    progress: ProgressFn | None = None,
) -> tuple[list[Question], JSONObject]:
    """``(questions, funnel)`` for ``chunks``; ``llm`` None selects the offline cloze generator."""
    res = generate_exam_full(chunks, llm, cfg, embedder=embedder, progress=progress)
    return res.questions, res.funnel


def write_exam_result(path: str | Path, result: ExamResult, cfg: ExamConfig, input_path: str | None = None) -> int:
    """Write the exam (header: config, generator, funnel, analytics, the corpus fingerprint) and its
    funnel/rejected sidecars."""
    meta = {
        "generator": result.generator,
        "config": cfg.model_dump(mode="json"),
        "input": input_path,
        "funnel": result.funnel,
        "analytics": exam_analytics(result.questions),
        **({CORPUS_KEY: result.corpus} if result.corpus else {}),  # what a run checks its index against
    }
    n = write_exam(path, result.questions, meta=meta)
    write_sidecars(path, result.funnel, result.rejected)
    return n


def write_exam_checked(path: str | Path, result: ExamResult, cfg: ExamConfig, input_path: str | None = None) -> int:
    """:func:`write_exam_result`, or, when no question survived, only the sidecars and a DataError saying why."""
    if result.questions:
        return write_exam_result(path, result, cfg, input_path=input_path)
    from ragrade.exam.funnel import sidecar_paths

    write_sidecars(path, result.funnel, result.rejected)
    reasons = result.funnel.get("reasons", {})
    refused = reasons.get("generation:refused", 0)
    unparsed = sum(n for k, n in reasons.items() if k.startswith("parse:"))
    raise DataError(
        f"no question survived generation and filtering ({result.funnel['generated']} candidates asked: "
        f"{refused} refused, {unparsed} unparseable, the rest filtered); see {sidecar_paths(path)[1]}"
    )


__all__ = [
    "ExamResult",
    "check_prompt_files",
    "generate_exam",
    "generate_exam_full",
    "interleave_by_document",
    "make_writer",
    "next_round",
    "request_cap",
    "run_filters",
    "sample_order",
    "stratum_of",
    "write_exam_checked",
    "write_exam_result",
]
