"""The results file of a robustness run, and asking the model and the judge (committing every batch to a sink)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ragrade.errors import ConfigError, DataError
from ragrade.io import JSONObject, iter_jsonl
from ragrade.outcome import Outcome
from ragrade.progress import counting_requests, note_failed
from ragrade.robust.build import Instance
from ragrade.robust.detect import parse_verdict
from ragrade.robust.prompts import JUDGE_SCHEMA, LangPrompts, PromptSet, judge_prompt

if TYPE_CHECKING:
    from ragrade.robust.config import RobustRunConfig
    from ragrade.robust.testbeds import Testbed

RESULTS_KIND = "robust_results"
RESULTS_VERSION = 2  # 2: untestable per record
JUDGE_MAX_TOKENS = 128  # the judge's reply: a yes/no verdict and a short reason, as JSON
Progress = Callable[[str, int, int], None]


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (the data file in the fingerprint)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_results(
    path: Path, expected: Mapping[str, object] | None = None
) -> tuple[JSONObject | None, dict[str, JSONObject]]:
    """The header and the latest record per key of a results file (later lines win)."""
    if not path.exists():
        return None, {}
    header: dict[str, Any] | None = None
    records: dict[str, JSONObject] = {}
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
            raise ConfigError(
                f"{path} holds results of another configuration (differs in: {', '.join(diff)}); "
                "use another $out or delete the file"
            )
    return header, records


def base_record(inst: Instance, model: str) -> JSONObject:
    """The record of one instance before the response: its documents in prompt order, ratios, flags."""
    item = inst.item
    rec: JSONObject = {
        "key": inst.key,
        "item_id": item.id,
        "testbed": inst.testbed,
        "condition": inst.condition,
        "model": model,
        "noise_ratio": inst.noise_ratio,
        "noise_ratio_actual": inst.noise_ratio_actual,
        "n_docs": len(inst.docs),
        "n_positive": inst.n_positive,
        "n_noise": inst.n_noise,
        "doc_order": [f"{d.pool}:{d.index}" for d in inst.docs],
        "documents": [d.to_record() for d in inst.docs],
        "flags": list(inst.flags),
        "skipped": inst.skipped,
        "system_prompt": inst.system_prompt,
        "query": item.query,
        "answer": [list(p) for p in item.answer],
    }
    if item.fakeanswer:
        rec["fakeanswer"] = [list(p) for p in item.fakeanswer]
    return rec


def answer_request(tb: Testbed, inst: Instance, lp: LangPrompts, cfg: RobustRunConfig) -> Any:
    """The generation request of one instance, with the testbed's prompt."""
    from ragrade.llm.base import GenerationRequest, Message

    texts = [d.text for d in inst.docs]
    pairs = tb.messages(inst, lp)
    messages = tuple(Message(role, content) for role, content in pairs)
    return GenerationRequest(
        messages=messages,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        seed=cfg.seed,
        question=inst.item.query,
        passages=tuple(texts),
        task="answer",
        meta={"key": inst.key},
    )


class RecordSink(Protocol):
    """Where each finished batch of records goes, durably (:class:`ragrade.robust.run.RecordJournal`)."""

    def write(self, records: Sequence[JSONObject]) -> None:
        """Store ``records`` (later versions of a key replace earlier ones)."""
        ...


def ask_model(
    llm: Any,
    tb: Testbed,
    todo: Sequence[Instance],
    lp: LangPrompts,
    cfg: RobustRunConfig,
    model: str,
    sink: RecordSink,
    progress: Progress | None,
    answering: Progress | None = None,
) -> list[dict[str, Any]]:
    """Ask the model every instance of ``todo`` in batches, appending each batch's records.

    ``progress("generate", answers on disk, len(todo))`` before the first batch and after each;
    ``answering`` (a display, not the interruption message: those answers are not on disk yet) gets the same
    counts while a batch runs, as its requests are answered.
    """
    from ragrade.llm.base import generate

    out: list[JSONObject] = []
    if progress and todo:
        progress("generate", 0, len(todo))
    for start in range(0, len(todo), cfg.batch_size):
        batch = todo[start : start + cfg.batch_size]
        with counting_requests(_live(answering, "generate", start, len(todo)), cap=len(batch)):
            completions = generate(llm, [answer_request(tb, inst, lp, cfg) for inst in batch])
        if len(completions) != len(batch):
            raise DataError(f"{model} returned {len(completions)} results for {len(batch)} requests")
        recs = []
        for inst, comp in zip(batch, completions, strict=True):
            rec = base_record(inst, model)
            outcome = Outcome.of(comp)  # a failed request has no response: missing, never a wrong answer
            rec.update(
                {
                    "response": outcome.value,
                    "failed": outcome.failed,
                    "error": outcome.error,
                    "latency_s": comp.latency_s,
                    "cached": comp.cached,
                    "attempts": comp.attempts,
                }
            )
            recs.append(rec)
        sink.write(recs)
        note_failed(sum(1 for r in recs if r["failed"]))
        out.extend(recs)
        if progress:
            progress("generate", start + len(batch), len(todo))
    return out


def _live(progress: Progress | None, stage: str, start: int, total: int) -> Callable[[int], None] | None:
    """``progress(stage, start + answered, total)`` as the running batch's requests are answered."""
    if progress is None:
        return None
    return lambda answered: progress(stage, start + answered, total)


def ask_judge(
    judge_llm: Any,
    records: dict[str, dict[str, Any]],
    tb: Testbed,
    prompts: PromptSet,
    cfg: RobustRunConfig,
    sink: RecordSink,
    progress: Progress | None,
) -> int:
    """Ask the judge about every answered record that has no verdict from it yet; returns the calls made.

    ``progress("judge", judged, to judge)`` before the first batch, after each and while one runs.
    """
    from ragrade.llm.base import GenerationRequest, Message, generate

    task = tb.judge_task
    if task is None:
        return 0
    name = judge_llm.name
    todo = [
        r
        for r in records.values()
        if r["condition"] == "documents"
        and not r.get("skipped")
        and not r.get("failed")
        and not (
            (r.get("judge") or {}).get("model") == name
            and (r.get("judge") or {}).get("task") == task
            and not (r.get("judge") or {}).get("error")
        )
    ]
    if progress and todo:
        progress("judge", 0, len(todo))
    for start in range(0, len(todo), cfg.batch_size):
        batch = todo[start : start + cfg.batch_size]
        reqs = [
            GenerationRequest(
                messages=(Message("user", judge_prompt(prompts, task, r["query"], r["response"])),),
                temperature=0.0,
                max_tokens=JUDGE_MAX_TOKENS,
                json_schema=JUDGE_SCHEMA,
                question=r["query"],
                passages=(r["response"],),
                task="judge",
                meta={"key": r["key"]},
            )
            for r in batch
        ]
        with counting_requests(_live(progress, "judge", start, len(todo)), cap=len(batch)):
            comps = generate(judge_llm, reqs)
        for r, comp in zip(batch, comps, strict=True):
            verdict = Outcome.of(comp)
            r["judge"] = {
                "task": task,
                "model": name,
                "raw": verdict.value,
                "verdict": parse_verdict(verdict.value) if verdict.value is not None else None,
                "error": verdict.error,
            }
        sink.write(batch)
        note_failed(sum(1 for r in batch if r["judge"]["error"]))
        if progress:
            progress("judge", start + len(batch), len(todo))
    return len(todo)


def resume_plan(
    instances: Sequence[Instance], existing: dict[str, JSONObject], model: str
) -> tuple[dict[str, JSONObject], list[Instance], list[JSONObject], int]:
    """What a run keeps and asks: (records kept by key, instances to ask, new skip records, resumed count).

    A record is kept when it answered with the same documents; an instance skipped now gets a skip
    record whatever an earlier run did (a new one when that run had not skipped it).
    """
    resumed = 0
    records: dict[str, JSONObject] = {}
    todo: list[Instance] = []
    fresh_skips: list[JSONObject] = []
    for inst in instances:
        old = existing.get(inst.key)
        if inst.skipped:  # skipped now (e.g. a new --min-positives), whatever an earlier run did
            rec = {**base_record(inst, model), "response": None, "failed": False, "error": None}
            records[inst.key] = rec
            if old is None or not old.get("skipped"):
                fresh_skips.append(rec)
        elif (
            old is not None
            and not old.get("failed")
            and not old.get("skipped")
            and old.get("doc_order") == [f"{d.pool}:{d.index}" for d in inst.docs]
        ):  # same documents
            records[inst.key] = old
            resumed += 1
        else:
            todo.append(inst)
    return records, todo, fresh_skips, resumed


__all__ = [
    "JUDGE_MAX_TOKENS",
    "RESULTS_KIND",
    "RESULTS_VERSION",
    "RecordSink",
    "answer_request",
    "ask_judge",
    "ask_model",
    "base_record",
    "file_sha256",
    "read_results",
    "resume_plan",
]
