"""Benchmark of the exam sweep with the offline student on the demo corpus: shared query work against the
per-pipeline path (``RAGRADE_SHARE_RETRIEVAL=0``), each measured in the same run.

    .venv/bin/python benchmarks/bench_sweep.py --workdir out/bench-sweep            # ~300 documents
    .venv/bin/python benchmarks/bench_sweep.py --docs 0 --workdir out/bench-sweep   # the full demo corpus

1. The demo grid (closed, bm25, dense, hybrid, oracle x k 1,3 x ICL 0,1,2 x two chunkings) in this process,
   models loaded beforehand (one component: the sweep call): rows per second and query encodings per distinct
   query text on both paths, and whether ``responses.parquet`` is the same (every column but the volatile
   ``latency_s`` and ``cached``); once with the student's answers in the LLM response cache (a rerun, as in
   the profile of issue 27) and once with an empty one (the student computes every answer).
2. End to end from the command line (``ragrade exam take`` in a new process, each with an empty cache folder,
   ``--no-cache``): 16 pipelines (dense and hybrid x k 1,3,5,10 x ICL 0,1) against one dense pipeline on the
   same questions, shared and per-pipeline.
3. (unless ``--no-ray``) the demo grid on the Ray executor against the local one, both shared.

The student embeds passage sentences in batches of one fixed shape (``embed_fixed``), so a sentence's vector
does not depend on the timing of the shards in flight: responses are compared exactly, scores included.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

RETRIEVERS = ["closed", "bm25", "dense", "hybrid", "oracle"]
CHUNKERS = {"recursive-200": ("recursive", 200, 20), "sentence-120": ("sentence", 120, 0)}
VOLATILE = ["latency_s", "cached"]


def build_inputs(
    work: Path, n_docs: int | None, n_questions: dict[str, int]
) -> tuple[dict[str, Path], dict[str, Path]]:
    """Demo documents -> two chunkings -> indexes, and one offline cloze exam per size (reused when present)."""
    indexes = {label: work / label for label in CHUNKERS}
    exams = {name: work / f"exam-{n}.jsonl" for name, n in n_questions.items()}
    if all((p / "manifest.json").is_file() for p in indexes.values()) and all(p.is_file() for p in exams.values()):
        return indexes, exams
    from ragrade.corpus.chunk import chunk_documents, create_chunker
    from ragrade.corpus.demo import build_demo_corpus
    from ragrade.exam.config import ExamConfig
    from ragrade.exam.files import write_exam
    from ragrade.exam.generate import generate_exam
    from ragrade.retrieval.index import IndexConfig, build_index

    t0 = time.perf_counter()
    docs = build_demo_corpus(n_docs)
    first: Any = None
    for label, (strategy, size, overlap) in CHUNKERS.items():
        chunks = chunk_documents(docs, create_chunker(strategy, size=size, overlap=overlap))
        build_index(chunks, indexes[label], IndexConfig())
        first = first or chunks
    for name, n in n_questions.items():
        questions, _ = generate_exam(first, None, ExamConfig(n=n, topic_field="topic"))
        write_exam(exams[name], questions)
    print(f"inputs: {len(docs)} documents, exams {n_questions} ({time.perf_counter() - t0:.1f}s)")
    return indexes, exams


def demo_grid(indexes: dict[str, Path], executor: str = "local", workers: int = 2, cache: bool = True) -> Any:
    from ragrade.run.spec import build_sweep_config

    return build_sweep_config(
        {
            "grid": {"llms": ["offline/student"], "retrievers": RETRIEVERS, "k": [1, 3], "icl": [0, 1, 2]},
            "indexes": {k: str(v) for k, v in indexes.items()},
            "llm_options": {"cache": cache},
            "executor": executor,
            "ray_workers": workers,
        }
    )


def timed_sweep(exam: Path, cfg: Any, out: Path, share: bool, cache_dir: Path) -> tuple[float, Any, float, float]:
    """Wall seconds, responses, query encodings per distinct query text and CPU seconds of one sweep, cold memos.

    Models stay loaded; the student's in-process memo is emptied, as in a new process.
    """
    from ragrade.llm import offline
    from ragrade.retrieval.query_memo import QUERY_STATS, SHARE_ENV, clear_query_memos
    from ragrade.run.pipeline import clear_resources
    from ragrade.run.summary import read_responses
    from ragrade.run.sweep import run_sweep

    os.environ[SHARE_ENV] = "1" if share else "0"
    os.environ["RAGRADE_CACHE_DIR"] = str(cache_dir)
    clear_query_memos()
    clear_resources()
    offline._EMBED.clear()
    QUERY_STATS.reset()
    t0, c0 = time.perf_counter(), _cpu()
    run_sweep(exam, cfg, out, overwrite=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    enc = QUERY_STATS.encoded / max(1, len(QUERY_STATS.per_text))
    return wall, read_responses(out).drop(columns=VOLATILE), enc, cpu


def _cpu() -> float:
    """CPU seconds of this process, all threads (a busy machine inflates wall time, not CPU time)."""
    import resource

    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def compare(a: Any, b: Any) -> str:
    """'identical', or which columns differ and by how much."""
    import numpy as np
    import pandas as pd

    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        return "identical"
    except AssertionError:
        pass
    answers = ["pipeline", "question_id", "chosen", "correct", "retrieved", "error", "parse_failed"]
    same = a[answers].astype(str).equals(b[answers].astype(str))
    diff = [np.max(np.abs(np.asarray(x) - np.asarray(y))) for x, y in zip(a["scores"], b["scores"], strict=True)]
    return f"answers and retrieval {'identical' if same else 'DIFFERENT'}; max score difference {max(diff):.1e}"


def bench_demo_grid(exam: Path, indexes: dict[str, Path], work: Path) -> None:
    from ragrade.embedding.embed import default_embedder

    default_embedder().embed(["warm-up: the model is loaded before timing"])
    warm_llm = Path(tempfile.mkdtemp(prefix="bench-sweep-cache-"))
    runs = {}  # (LLM cache, path) -> (seconds, responses, encodings per distinct query)
    runs["cold", "per-pipeline"] = timed_sweep(exam, demo_grid(indexes), work / "run-per-cold", False, warm_llm)
    runs["warm", "per-pipeline"] = timed_sweep(exam, demo_grid(indexes), work / "run-per-warm", False, warm_llm)
    runs["warm", "shared"] = timed_sweep(exam, demo_grid(indexes), work / "run-shared-warm", True, warm_llm)
    cold_dir = Path(tempfile.mkdtemp(prefix="bench-sweep-cache-"))
    runs["cold", "shared"] = timed_sweep(exam, demo_grid(indexes), work / "run-shared-cold", True, cold_dir)
    shared = runs["warm", "shared"][1]
    rows = len(shared)
    print(f"\n[1] demo grid, {shared['pipeline'].nunique()} pipelines x {shared['question_id'].nunique()} questions")
    print("    component: the sweep call in this process (models loaded, empty memos, no query vector stored yet)")
    for llm in ("warm", "cold"):
        what = "answers from the LLM response cache" if llm == "warm" else "an empty LLM response cache"
        print(f"    with {what}:")
        for path in ("per-pipeline", "shared"):
            sec, _, enc, cpu = runs[llm, path]
            print(
                f"      {path:<13} wall {sec:6.1f}s {rows / sec:7.1f} rows/s, CPU {cpu:6.1f}s "
                f"{rows / cpu:7.1f} rows/CPU-s, {enc:.1f} query encodings per distinct text"
            )
        per, sh = runs[llm, "per-pipeline"], runs[llm, "shared"]
        same = compare(per[1], sh[1])
        print(
            f"      ratio shared / per-pipeline: wall {per[0] / sh[0]:.2f}x, CPU {per[3] / sh[3]:.2f}x; "
            f"responses: {same}"
        )


def cli_take(exam: Path, index: Path, out: Path, grid: list[str], share: bool) -> float:
    """Wall seconds of one ``ragrade exam take`` in a new process with an empty cache folder."""
    env = {**os.environ, "RAGRADE_SHARE_RETRIEVAL": "1" if share else "0"}
    env["RAGRADE_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-sweep-cli-")
    cmd = [sys.executable, "-m", "ragrade", "exam", "take", str(exam), "--out", str(out), "--overwrite"]
    cmd += ["--index", f"recursive-200={index}", "--llm", "offline/student", "--no-cache", *grid]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def bench_cli(exam: Path, index: Path, work: Path) -> None:
    sixteen = ["--retrievers", "dense,hybrid", "--k", "1,3,5,10", "--icl", "0,1"]
    one = ["--retrievers", "dense", "--k", "3", "--icl", "1"]  # ICL 1: the same held-out pool, the same questions
    print(f"\n[2] end to end from the command line ({exam.name}; each a new process, empty cache folder):")
    for share in (False, True):
        t1 = cli_take(exam, index, work / "cli-one", one, share)
        t16 = cli_take(exam, index, work / "cli-16", sixteen, share)
        label = "shared      " if share else "per-pipeline"
        print(f"    {label}: 1 dense pipeline {t1:6.1f}s, 16 pipelines {t16:6.1f}s -> ratio {t16 / t1:.2f}x")
    p1, p16 = distinct_passages(work / "cli-one"), distinct_passages(work / "cli-16")
    print(
        f"    distinct work: {p1} distinct passages for the one pipeline, {p16} for the 16 "
        f"(ratio {p16 / max(1, p1):.2f}x; the student embeds every sentence of each distinct passage once)"
    )
    print("    target: 16 pipelines within 1.5x of one (shared)")


def distinct_passages(run: Path) -> int:
    """Distinct chunks retrieved over a run's responses (the passages whose sentences the student embeds)."""
    from ragrade.run.summary import read_responses

    df = read_responses(run)
    return len({c for ids in df["retrieved"] if ids is not None for c in ids})


def bench_ray(exam: Path, indexes: dict[str, Path], work: Path, workers: int) -> None:
    from ragrade.run.summary import read_responses
    from ragrade.run.sweep import run_sweep

    os.environ["RAGRADE_SHARE_RETRIEVAL"] = "1"
    os.environ["RAGRADE_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-sweep-cache-")
    t0 = time.perf_counter()
    run_sweep(exam, demo_grid(indexes, "ray", workers), work / "run-ray", overwrite=True)
    ray_s = time.perf_counter() - t0
    import ray

    ray.shutdown()
    t0 = time.perf_counter()
    run_sweep(exam, demo_grid(indexes), work / "run-local", overwrite=True)
    local_s = time.perf_counter() - t0
    same = (
        read_responses(work / "run-ray")
        .drop(columns=VOLATILE)
        .equals(read_responses(work / "run-local").drop(columns=VOLATILE))
    )
    print(f"\n[3] demo grid on Ray ({workers} actors, incl. start-up and model loads): {ray_s:.1f}s")
    print(f"    local (shared, models loaded): {local_s:.1f}s; ratio ray / local {ray_s / local_s:.2f}x; same: {same}")


def main() -> None:
    """Run the benchmark and print throughput and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=300, help="demo documents (0 = all)")
    ap.add_argument("--questions", type=int, default=200, help="questions of the demo-grid exam")
    ap.add_argument("--cli-questions", type=int, default=300, help="questions of the command-line comparison")
    ap.add_argument("--workers", type=int, default=2, help="Ray actors")
    ap.add_argument("--workdir", type=Path, default=None, help="keep inputs here (reused on the next run)")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--no-cli", action="store_true")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    indexes, exams = build_inputs(work, args.docs or None, {"grid": args.questions, "cli": args.cli_questions})
    bench_demo_grid(exams["grid"], indexes, work)
    if not args.no_cli:
        bench_cli(exams["cli"], indexes["recursive-200"], work)
    if not args.no_ray:
        bench_ray(exams["grid"], indexes, work, args.workers)


if __name__ == "__main__":
    main()
