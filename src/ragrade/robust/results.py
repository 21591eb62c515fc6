"""The results file of a robustness run, and asking the model and the judge (appending after every batch)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.errors import ConfigError, DataError
from ragrade.io import dumps_line, header_record, iter_jsonl, now_iso
from ragrade.progress import note_failed
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
    path: Path, expected: dict[str, Any] | None = None
) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
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
            raise ConfigError(
                f"{path} holds results of another configuration (differs in: {', '.join(diff)}); "
                "use another --out or delete the file"
            )
    return header, records


def base_record(inst: Instance, model: str) -> dict[str, Any]:
    """The record of one instance before the response: its documents in prompt order, ratios, flags."""
    item = inst.item
    rec: dict[str, Any] = {
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


class Appender:
    """Appends records to the results file, writing the header first when the file is new."""

    def __init__(self, path: Path, fp: dict[str, Any]) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.stat().st_size == 0:
            head = header_record(RESULTS_KIND, RESULTS_VERSION, {"fingerprint": fp, "created": now_iso()})
            path.write_text(dumps_line(head) + "\n", encoding="utf-8")

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Append ``records`` and flush."""
        with self.path.open("a", encoding="utf-8") as fh:
            for r in records:
                fh.write(dumps_line(r) + "\n")
            fh.flush()


def ask_model(
    llm: Any,
    tb: Testbed,
    todo: Sequence[Instance],
    lp: LangPrompts,
    cfg: RobustRunConfig,
    model: str,
    sink: Appender,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    """Ask the model every instance of ``todo`` in batches, appending each batch's records."""
    from ragrade.llm.base import generate

    out: list[dict[str, Any]] = []
    for start in range(0, len(todo), cfg.batch_size):
        batch = todo[start : start + cfg.batch_size]
        completions = generate(llm, [answer_request(tb, inst, lp, cfg) for inst in batch])
        if len(completions) != len(batch):
            raise DataError(f"{model} returned {len(completions)} results for {len(batch)} requests")
        recs = []
        for inst, comp in zip(batch, completions, strict=True):
            rec = base_record(inst, model)
            ok = comp.error is None and comp.text is not None
            rec.update(
                {
                    "response": comp.text if ok else None,
                    "failed": not ok,
                    "error": None if ok else (comp.error or "no text returned"),
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


def ask_judge(
    judge_llm: Any,
    records: dict[str, dict[str, Any]],
    tb: Testbed,
    prompts: PromptSet,
    cfg: RobustRunConfig,
    sink: Appender,
    progress: Progress | None,
) -> int:
    """Ask the judge about every answered record that has no verdict from it yet; returns the calls made."""
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
        comps = generate(judge_llm, reqs)
        for r, comp in zip(batch, comps, strict=True):
            ok = comp.error is None and comp.text is not None
            r["judge"] = {
                "task": task,
                "model": name,
                "raw": comp.text if ok else None,
                "verdict": parse_verdict(comp.text) if ok else None,
                "error": None if ok else (comp.error or "no text returned"),
            }
        sink.write(batch)
        note_failed(sum(1 for r in batch if r["judge"]["error"]))
        if progress:
            progress("judge", start + len(batch), len(todo))
    return len(todo)


def resume_plan(
    instances: Sequence[Instance], existing: dict[str, dict[str, Any]], model: str
) -> tuple[dict[str, dict[str, Any]], list[Instance], list[dict[str, Any]], int]:
    """What a run keeps and asks: (records kept by key, instances to ask, new skip records, resumed count).

    A record is kept when it answered with the same documents; an instance skipped now gets a skip
    record whatever an earlier run did (a new one when that run had not skipped it).
    """
    resumed = 0
    records: dict[str, dict[str, Any]] = {}
    todo: list[Instance] = []
    fresh_skips: list[dict[str, Any]] = []
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
    "Appender",
    "answer_request",
    "ask_judge",
    "ask_model",
    "base_record",
    "file_sha256",
    "read_results",
    "resume_plan",
]
